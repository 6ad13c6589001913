"""``convert``: write the checkpoint the backend loads.

* ``tensorrt`` backend → TensorRT-LLM checkpoint (docs/reference/tensorrt-llm.md §2.2): ``config.json``
(architecture,
  dtype, ``mapping`` with ``world_size = tp × pp``, ``quantization.quant_algo`` /
  ``kv_cache_quant_algo``) and ``rank{N}.safetensors`` per rank, through ModelOpt's
  ``export_tensorrt_llm_checkpoint`` (ModelOpt ≤ 0.48 still has it; pinned 0.47.0).
* ``pytorch`` backend → unified Hugging Face checkpoint through ``export_hf_checkpoint``
  (``config.json`` with a ``quantization_config``, ``hf_quant_config.json``, safetensors); format
  ``none`` copies the source files unchanged.

When ``quantize`` ran in the same process its quantized model is exported from memory (no second
load); otherwise (a resumed build, a parallelism change re-sharding an earlier calibration, format
``none``) the model is loaded and, when quantized, the ``quantize`` stage's state restored
(:func:`engine_builder.quantize.restore_quantized`). Output goes to a temporary directory renamed
into place, and is checked (rank-file count = world size, mapping, quant_algo present for a
quantized format) before the stage counts as done. The tokenizer files are copied next to it.
"""

# ruff: noqa: PLC0415 - torch / ModelOpt / transformers load in seconds; imported only when the stage runs, so a bad spec fails in milliseconds.

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from engine_builder.fetch import wanted
from engine_builder.planner.formats import KV_CACHE_DTYPE_TABLE, QUANT_FORMAT_TABLE
from engine_builder.quantize import load_model, restore_quantized, seed_everything
from engine_builder.report import BuildError
from engine_builder.spec import BuildSpec

#: Source dtype → export dtype (TensorRT-LLM's quantize.py: fp32 sources are exported as fp16).
EXPORT_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float16"}

#: ``quant_algo`` / ``kv_cache_quant_algo`` the export writes (the format table; measured on ModelOpt
#: 0.47). Formats without a TensorRT-LLM checkpoint export are absent.
EXPECTED_QUANT_ALGO: dict[str, str | None] = {
    f: i.quant_algo for f, i in QUANT_FORMAT_TABLE.items() if "tensorrt" in i.backends
}
EXPECTED_KV_ALGO: dict[str, str | None] = {k: i.quant_algo for k, i in KV_CACHE_DTYPE_TABLE.items()}


def export_dtype(torch_dtype: str | None) -> str:
    return EXPORT_DTYPES.get(str(torch_dtype or "float16").replace("torch.", ""), "float16")


def convert(
    spec: BuildSpec,
    model_dir: Path,
    quantized_state: Path | None,
    out_dir: Path,
    torch_dtype: str | None,
    *,
    model: Any = None,
) -> dict[str, Any]:
    """Write the backend's checkpoint to ``out_dir`` (replaced atomically). ``model``: the quantized
    model ``quantize`` returned in this process (then ``quantized_state`` is not read), or None to
    load it. Returns a summary (``kind``, ``dtype``, ``files``, ``model_source`` (``memory`` or
    ``loaded``), ``load_seconds``, ``export_seconds``, and for TensorRT-LLM ``mapping`` /
    ``quantization``).

    Raises ``ConversionFailed``, ``UnsupportedArchitecture`` (ModelOpt has no decoder type for the
    model), ``HostOutOfMemory``.
    """
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if spec.backend == "pytorch" and quantized_state is None and model is None:
        summary = _copy_source(model_dir, tmp)
    else:
        summary = _export(spec, model_dir, quantized_state, tmp, torch_dtype, model=model)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return summary


def _copy_source(model_dir: Path, dest: Path) -> dict[str, Any]:
    files = []
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and wanted(path.name):
            shutil.copy2(path, dest / path.name)
            files.append(path.name)
    return {"kind": "hf", "dtype": "source", "files": files}


def _export(
    spec: BuildSpec, model_dir: Path, state: Path | None, dest: Path, torch_dtype: str | None, *, model: Any
) -> dict[str, Any]:
    import torch
    from modelopt.torch.export import export_hf_checkpoint, export_tensorrt_llm_checkpoint
    from modelopt.torch.export.model_utils import get_model_type

    started = time.monotonic()
    source = "memory"
    if model is None:
        source = "loaded"
        seed_everything()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = load_model(model_dir, device)
        if state is not None:
            try:
                model = restore_quantized(model, state)
            except Exception as exc:
                raise BuildError("ConversionFailed", f"restoring the ModelOpt state {state}: {exc}") from exc
    timing = {"model_source": source, "load_seconds": round(time.monotonic() - started, 3)}
    started = time.monotonic()
    dtype_name = export_dtype(torch_dtype)
    dtype = getattr(torch, dtype_name)
    try:
        if spec.backend == "tensorrt":
            decoder_type = get_model_type(model)
            if decoder_type is None:
                raise BuildError(
                    "UnsupportedArchitecture",
                    f"ModelOpt cannot export {type(model).__name__} to a TensorRT-LLM checkpoint",
                    field="model.uri",
                )
            export_tensorrt_llm_checkpoint(
                model,
                decoder_type,
                dtype,
                export_dir=dest,
                inference_tensor_parallel=spec.parallelism.tensor,
                inference_pipeline_parallel=spec.parallelism.pipeline,
            )
            summary = _check_trtllm_checkpoint(spec, dest, dtype_name, decoder_type)
        else:
            if not getattr(model.config, "architectures", None):
                model.config.architectures = [type(model).__name__]
            export_hf_checkpoint(model, dtype=dtype, export_dir=dest)
            summary = {"kind": "hf", "dtype": dtype_name, "files": sorted(p.name for p in dest.iterdir())}
        return {**summary, **timing, "export_seconds": round(time.monotonic() - started, 3)}
    except BuildError:
        raise
    except MemoryError as exc:
        raise BuildError("HostOutOfMemory", f"export: {exc}") from exc
    except Exception as exc:
        raise BuildError("ConversionFailed", f"ModelOpt export: {type(exc).__name__}: {exc}") from exc


def _check_trtllm_checkpoint(spec: BuildSpec, dest: Path, dtype: str, decoder_type: str) -> dict[str, Any]:
    config = json.loads((dest / "config.json").read_text(encoding="utf-8"))
    mapping = config.get("mapping", {})
    world = spec.parallelism.world_size
    ranks = sorted(p.name for p in dest.glob("rank*.safetensors"))
    expected = [f"rank{r}.safetensors" for r in range(world)]
    problems = []
    if ranks != expected:
        problems.append(f"rank files {ranks}, expected {expected}")
    if (mapping.get("tp_size"), mapping.get("pp_size"), mapping.get("world_size")) != (
        spec.parallelism.tensor,
        spec.parallelism.pipeline,
        world,
    ):
        problems.append(
            f"mapping {mapping} does not match tp={spec.parallelism.tensor} pp={spec.parallelism.pipeline}"
        )
    quant = config.get("quantization", {})
    want_algo = EXPECTED_QUANT_ALGO.get(spec.quantization.format)
    if spec.quantization.format in EXPECTED_QUANT_ALGO and quant.get("quant_algo") != want_algo:
        problems.append(f"quant_algo {quant.get('quant_algo')!r}, expected {want_algo!r}")
    want_kv = EXPECTED_KV_ALGO[spec.quantization.kv_cache_dtype]
    if quant.get("kv_cache_quant_algo") != want_kv:
        problems.append(f"kv_cache_quant_algo {quant.get('kv_cache_quant_algo')!r}, expected {want_kv!r}")
    if problems:
        raise BuildError("ConversionFailed", "exported checkpoint is inconsistent: " + "; ".join(problems))
    return {
        "kind": "tensorrt_llm",
        "decoder_type": decoder_type,
        "dtype": dtype,
        "architecture": config.get("architecture"),
        "mapping": mapping,
        "quantization": quant,
        "files": sorted(p.name for p in dest.iterdir()),
    }


def copy_tokenizer(model_dir: Path, dest: Path) -> list[str]:
    """Copy tokenizer and config files (not weights) to ``dest``; returns the names copied.

    ``config.json`` comes along because ``AutoTokenizer`` reads ``model_type`` from it when
    ``tokenizer_config.json`` names no tokenizer class."""
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and wanted(path.name) and not path.name.endswith((".safetensors", ".index.json")):
            shutil.copy2(path, dest / path.name)
            names.append(path.name)
    return names
