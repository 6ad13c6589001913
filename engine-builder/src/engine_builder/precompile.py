"""Compile ModelOpt's CUDA extensions ahead of time: ``python -m engine_builder.precompile``.

ModelOpt JIT-compiles ``modelopt_cuda_ext`` (+ ``_fp8``, ``_mx``) with ``torch.utils.cpp_extension``
on first use — about 48 s of a builder Job's GPU time per AWQ build, measured on an H200
(docs/reference/tensorrt-llm.md §1.5). The builder image runs this module at ``docker build`` time instead.

There is no GPU during ``docker build``, and ModelOpt's own ``extensions.precompile()`` skips every
extension when ``torch.cuda.is_available()`` is False. Compiling needs only ``nvcc``, so this
module reports CUDA as available while it calls ModelOpt's loaders — ModelOpt's own names, sources
and flags, hence the same build hash the runtime looks up — with ``TORCH_CUDA_ARCH_LIST`` fixed (the
image must keep the same value in its environment, or the runtime rebuilds). Loading the compiled
module may fail without a driver; the compiled ``.so`` in ``TORCH_EXTENSIONS_DIR`` is what counts,
and the exit code is non-zero when one is missing.
"""

# ruff: noqa: PLC0415 - torch and ModelOpt are imported only when the command runs.

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

EXTENSIONS = ("modelopt_cuda_ext", "modelopt_cuda_ext_fp8", "modelopt_cuda_ext_mx")


def precompile(arch_list: str | None = None) -> dict[str, str | None]:
    """Compile the extensions; returns name → path of the built ``.so`` (None when missing)."""
    if arch_list:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        raise SystemExit("set TORCH_CUDA_ARCH_LIST (e.g. '9.0;10.0') — there may be no GPU to ask")
    import torch
    from torch.utils.cpp_extension import _get_build_directory

    real = torch.cuda.is_available
    torch.cuda.is_available = lambda: True  # compile-only: nvcc needs no GPU
    try:
        from modelopt.torch.quantization import extensions

        for loader in (extensions.get_cuda_ext, extensions.get_cuda_ext_fp8, extensions.get_cuda_ext_mx):
            started = time.monotonic()
            try:
                loader()
            except Exception as exc:  # loading without a driver may fail after compiling
                print(f"{loader.__name__}: {type(exc).__name__}: {exc}", file=sys.stderr)
            print(f"{loader.__name__}: {time.monotonic() - started:.1f}s", flush=True)
    finally:
        torch.cuda.is_available = real
    built: dict[str, str | None] = {}
    for name in EXTENSIONS:
        so = sorted(Path(_get_build_directory(name, verbose=False)).glob("*.so"))
        built[name] = str(so[0]) if so else None
    return built


def main() -> int:
    built = precompile(sys.argv[1] if len(sys.argv) > 1 else None)
    for name, path in built.items():
        print(f"{name}: {path or 'MISSING'}")
    return 0 if all(built.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
