"""The ``compile`` stage: ``trtllm-build`` as a subprocess (tensorrt backend only).

Flags are derived from the spec and the plan (docs/reference/tensorrt-llm.md §3.1): ``--max_batch_size``,
``--max_seq_len`` and ``--max_num_tokens`` are always set (the upstream defaults 2048 /
max_position_embeddings / 8192 are build-OOM bait, docs/reference/tensorrt-llm.md §9.3), plus
``--max_beam_width``,
``--max_input_len`` when given, ``--gemm_plugin`` (always, ``disable`` included), ``--logits_dtype``
(the Triton repository's logits type), ``--use_paged_context_fmha``, paged KV cache,
``--workers`` and the speculative-decoding mode. Tensor/pipeline parallelism is not a flag: it is
the checkpoint's ``mapping`` (trtllm-build emits ``world_size`` engines).

The build's output is streamed line by line to stdout and ``<workdir>/logs/compile.log``; on failure
the log tail is classified (:func:`classify_build_log`). Without ``trtllm-build`` or the
``tensorrt_llm`` package (e.g. on a CPU machine) the stage fails with ``ToolchainMissing`` — it is
never faked; the CLI's ``--skip-compile`` skips it explicitly and the result is marked ``Partial``.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine_builder.contract import without_bundle
from engine_builder.report import BuildError, Reason
from engine_builder.spec import BuildSpec
from engine_builder.triton import ENGINE_LOGITS_DTYPE

ProgressFn = Callable[[float, float | None, str, str], None]


def trtllm_build_command(
    spec: BuildSpec,
    limits: dict[str, Any],
    checkpoint_dir: Path,
    engine_dir: Path,
    executable: str = "trtllm-build",
) -> list[str]:
    """The ``trtllm-build`` argv. ``limits``: ``max_batch_size``, ``max_seq_len``,
    ``max_num_tokens`` (the plan's values, which already honour the spec's)."""
    b = spec.build
    cmd = [
        executable,
        "--checkpoint_dir",
        str(checkpoint_dir),
        "--output_dir",
        str(engine_dir),
        "--max_batch_size",
        str(int(limits["max_batch_size"])),
        "--max_seq_len",
        str(int(limits["max_seq_len"])),
        "--max_num_tokens",
        str(int(limits["max_num_tokens"])),
        "--max_beam_width",
        str(b.max_beam_width),
    ]
    if b.max_input_len is not None:
        cmd += ["--max_input_len", str(b.max_input_len)]
    # Always explicit, ``disable`` included (audit B10): TensorRT-LLM ``tensorrt_llm/plugin/plugin.py``
    # ``PluginConfig.from_arguments`` sets ``_explicitly_disable_gemm_plugin`` only when the argument
    # is the literal "disable" ("nvfp4 gemm uses plugin by default currently"); an omitted flag leaves
    # the default None, and an NVFP4 build then turns the GEMM plugin on anyway.
    cmd += ["--gemm_plugin", b.gemm_plugin]
    # The logits dtype the Triton repository declares (audit B9, engine_builder.triton).
    cmd += ["--logits_dtype", ENGINE_LOGITS_DTYPE]
    cmd += ["--use_paged_context_fmha", "enable" if b.paged_context_fmha else "disable"]
    cmd += ["--kv_cache_type", "paged", "--workers", str(b.workers)]
    sd = b.speculative_decoding
    if sd.mode != "none":
        cmd += ["--speculative_decoding_mode", sd.mode, "--max_draft_len", str(sd.max_draft_len)]
    return cmd


def toolchain_problem(executable: str = "trtllm-build") -> str | None:
    """Why the engine toolchain is unusable here, or None when ``trtllm-build`` and
    ``tensorrt_llm`` are both present."""
    missing = []
    if shutil.which(executable) is None:
        missing.append(f"`{executable}` is not on PATH")
    if importlib.util.find_spec("tensorrt_llm") is None:
        missing.append("the `tensorrt_llm` Python package is not installed")
    if not missing:
        return None
    return (
        " and ".join(missing)
        + ": run the builder in the TensorRT-LLM release image the engine will be served with "
        "(runtime_image), or use backend pytorch"
    )


#: (substring, reason), first match wins; matched case-insensitively against the log tail.
_LOG_RULES: tuple[tuple[str, Reason], ...] = (
    ("cuda_error_out_of_memory", "GPUOutOfMemory"),
    ("cudaerrormemoryallocation", "GPUOutOfMemory"),
    ("outofmemoryerror", "GPUOutOfMemory"),
    ("cuda out of memory", "GPUOutOfMemory"),
    ("out of memory", "GPUOutOfMemory"),
    ("std::bad_alloc", "HostOutOfMemory"),
    ("memoryerror", "HostOutOfMemory"),
    ("no cuda-capable device", "RequiresGPU"),
    ("no cuda gpus are available", "RequiresGPU"),
    ("unsupported architecture", "UnsupportedArchitecture"),
    ("unsupported model architecture", "UnsupportedArchitecture"),
    ("is not supported on sm", "UnsupportedArchitecture"),
)


def classify_build_log(lines: Sequence[str], returncode: int) -> Reason:
    """Failure class of a finished ``trtllm-build`` from its log tail and return code.

    A SIGKILL (return code -9 / 137) without a log clue is the kernel's OOM killer in practice:
    ``HostOutOfMemory``.
    """
    text = "\n".join(lines).lower()
    for needle, reason in _LOG_RULES:
        if needle in text:
            return reason
    if returncode in (-9, 137):
        return "HostOutOfMemory"
    return "CompileFailed"


def run_build(
    cmd: Sequence[str],
    log_path: Path,
    progress: ProgressFn,
    world_size: int,
) -> dict[str, Any]:
    """Run ``cmd``, streaming its output; verify ``config.json`` + ``rank{r}.engine``.

    Raises ``ToolchainMissing`` before starting when the toolchain is absent, the classified reason
    when the build fails. Returns ``{"command": [...], "engines": [...]}``.
    """
    problem = toolchain_problem(cmd[0])
    if problem:
        raise BuildError("ToolchainMissing", problem)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: collections.deque[str] = collections.deque(maxlen=200)
    engine_dir = Path(cmd[cmd.index("--output_dir") + 1])
    with log_path.open("w", encoding="utf-8") as log:
        # A delivered builder (PYTHONPATH = its bundle, with ModelOpt 0.47) must not leak into
        # trtllm-build, which imports the image's own TensorRT-LLM and ModelOpt.
        proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env=without_bundle(dict(os.environ)),
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            sys.stdout.write(line)
            tail.append(line.rstrip("\n"))
            done = len(list(engine_dir.glob("rank*.engine"))) if engine_dir.exists() else 0
            progress(done, world_size, "engines", "trtllm-build")
        returncode = proc.wait()
    if returncode != 0:
        reason = classify_build_log(list(tail), returncode)
        last = "\n".join(list(tail)[-15:])
        raise BuildError(reason, f"trtllm-build exited with {returncode}; log tail:\n{last}")
    engines = sorted(p.name for p in engine_dir.glob("rank*.engine"))
    expected = [f"rank{r}.engine" for r in range(world_size)]
    if engines != expected or not (engine_dir / "config.json").is_file():
        raise BuildError("CompileFailed", f"trtllm-build succeeded but wrote {engines}, expected {expected}")
    return {"command": list(cmd), "engines": engines}
