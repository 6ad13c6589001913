"""``quantize``: post-training quantization with NVIDIA ModelOpt (``nvidia-modelopt``).

Recipe, as TensorRT-LLM's ``quantize_by_modelopt.py`` does it (docs/reference/tensorrt-llm.md §1.2), on
ModelOpt 0.47's
list-form ``quant_cfg``:

==========  ===========================  =========================================
format      ModelOpt config              exported ``quant_algo``
==========  ===========================  =========================================
fp8         ``FP8_DEFAULT_CFG``          FP8
int8_sq     ``INT8_SMOOTHQUANT_CFG``     W8A8_SQ_PER_CHANNEL
int4_awq    ``INT4_AWQ_CFG``             W4A16_AWQ (``awq_block_size`` → group_size)
w4a8_awq    ``W4A8_AWQ_BETA_CFG``        W4A8_AWQ
nvfp4       ``NVFP4_DEFAULT_CFG``        NVFP4 (calibration needs CUDA)
mxfp8       ``MXFP8_DEFAULT_CFG``        (Blackwell; PyTorch backend)
none        — / KV-only config           None
==========  ===========================  =========================================

KV cache: ``fp8`` appends ``FP8_KV_CFG``'s entries; ``int8`` appends an 8-bit ``*[kv]_bmm_quantizer``
entry. (TensorRT-LLM's wrapper used 8-bit *output* quantizers on ``k_proj``/``v_proj``; ModelOpt
0.47's checkpoint export no longer reads those — measured: ``kv_cache_quant_algo`` stays null — while
the ``[kv]_bmm`` quantizers export as ``INT8``.) AWQ calibrates on at most 32 samples, as
TensorRT-LLM clamps it. Calibration batches that raise ``torch.OutOfMemoryError`` are retried at half
the batch size, as TensorRT-LLM's loop does; at batch size 1 the failure is ``GPUOutOfMemory``.

The result is persisted with ``modelopt.torch.opt.save`` (ModelOpt state + weights) so ``convert``
can run in a later process (``mto.restore``) — that is what makes the stage boundary resumable.
Everything is seeded (:data:`SEED`), so a re-run produces the same bytes on the same hardware.
"""

# ruff: noqa: PLC0415 - torch / ModelOpt / transformers load in seconds; imported only when the stage runs, so a bad spec fails in milliseconds.

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from engine_builder.planner.formats import AWQ_MAX_SAMPLES, QUANT_FORMAT_TABLE, format_info
from engine_builder.report import BuildError
from engine_builder.spec import BuildSpec, Calibration

SEED = 1234

#: format → ModelOpt config name (the format table's ``modelopt_config``).
QUANT_CONFIGS: dict[str, str] = {
    f: i.modelopt_config for f, i in QUANT_FORMAT_TABLE.items() if i.modelopt_config is not None
}
INT8_KV_ENTRY: dict[str, Any] = {
    "quantizer_name": "*[kv]_bmm_quantizer",
    "cfg": {"num_bits": 8, "axis": None},
}

ProgressFn = Callable[[float, float | None, str, str], None]


def needs_quantization(spec: BuildSpec) -> bool:
    """False when there is nothing to calibrate: format ``none`` and KV cache ``auto``."""
    q = spec.quantization
    return q.format != "none" or q.kv_cache_dtype != "auto"


def build_quant_config(fmt: str, kv_cache_dtype: str, awq_block_size: int | None, mtq: Any) -> dict[str, Any]:
    """The ModelOpt config dict for a format + KV-cache dtype (a deep copy; ``mtq`` is
    ``modelopt.torch.quantization``, passed in so the function stays import-light and testable).

    Raises ``BadSpec`` for a format this ModelOpt does not have.
    """
    if fmt == "none":
        config: dict[str, Any] = {"quant_cfg": [{"quantizer_name": "*", "enable": False}], "algorithm": "max"}
    else:
        name = QUANT_CONFIGS.get(fmt)
        if name is None or not hasattr(mtq, name):
            raise BuildError(
                "BadSpec",
                f"quantization.format {fmt!r} is not available in this ModelOpt "
                f"(known: {', '.join(sorted(QUANT_CONFIGS))})",
                field="quantization.format",
            )
        config = copy.deepcopy(getattr(mtq, name))
    if format_info(fmt).awq and awq_block_size:
        _set_awq_block_size(config, awq_block_size)
    if kv_cache_dtype == "fp8":
        config["quant_cfg"] = [*config["quant_cfg"], *copy.deepcopy(list(mtq.FP8_KV_CFG["quant_cfg"]))]
    elif kv_cache_dtype == "int8":
        config["quant_cfg"] = [*config["quant_cfg"], copy.deepcopy(INT8_KV_ENTRY)]
    return config


def _set_awq_block_size(config: dict[str, Any], block_size: int) -> None:
    found = False
    for entry in config["quant_cfg"]:
        if entry.get("quantizer_name") != "*weight_quantizer":
            continue
        cfgs = entry.get("cfg")
        for cfg in cfgs if isinstance(cfgs, list) else [cfgs]:
            if isinstance(cfg, dict) and isinstance(cfg.get("block_sizes"), dict):
                cfg["block_sizes"][-1] = block_size
                found = True
    if not found:
        raise BuildError(
            "BadSpec",
            "quantization.awq_block_size: this ModelOpt config has no weight block size to set",
            field="quantization.awq_block_size",
        )


def calibration_sample_count(spec: BuildSpec) -> int:
    n = spec.quantization.calibration.num_samples
    return min(n, AWQ_MAX_SAMPLES) if format_info(spec.quantization.format).awq else n


# ------------------------------------------------------------------------------------------------
# Calibration text


def load_calibration_texts(calibration: Calibration, limit: int) -> list[str]:
    """Up to ``limit`` non-empty text samples.

    ``calibration.dataset``: ``bundled`` (package data ``data/calibration.txt``, CC0), a local
    ``.txt`` (one sample per line, ``#`` lines skipped) or ``.jsonl`` (``text`` field) file, or a
    Hugging Face dataset name (needs the ``datasets`` package, present in the TensorRT-LLM images;
    the ``text``/``article`` column of its ``train`` split). Raises ``BadSpec`` (field
    ``quantization.calibration.dataset``) for an unreadable or empty source.
    """
    source = calibration.dataset
    field = "quantization.calibration.dataset"
    if source == "bundled":
        text = resources.files("engine_builder").joinpath("data", "calibration.txt").read_text("utf-8")
        samples = _lines(text)
    elif Path(source).suffix in (".txt", ".jsonl") or Path(source).exists():
        path = Path(source)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BuildError("BadSpec", f"{field}: cannot read {source}: {exc}", field=field) from exc
        if path.suffix == ".jsonl":
            samples = []
            for n, line in enumerate(raw.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise BuildError("BadSpec", f"{field}: {source}:{n}: not JSON", field=field) from exc
                if (
                    isinstance(record, dict)
                    and isinstance(record.get("text"), str)
                    and record["text"].strip()
                ):
                    samples.append(record["text"].strip())
        else:
            samples = _lines(raw)
    else:
        samples = _hf_dataset_texts(source, limit)
    if not samples:
        raise BuildError("BadSpec", f"{field}: {source} holds no text samples", field=field)
    return samples[:limit]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _hf_dataset_texts(name: str, limit: int) -> list[str]:
    field = "quantization.calibration.dataset"
    try:
        import datasets  # type: ignore[import-not-found]
    except ImportError as exc:
        raise BuildError(
            "BadSpec",
            f"{field}: {name!r} is neither 'bundled' nor a local .txt/.jsonl file, and the `datasets` "
            "package is not installed in this image to load it from the Hub",
            field=field,
        ) from exc
    try:
        ds = datasets.load_dataset(name, split="train", streaming=True)
        out: list[str] = []
        for row in ds:
            value = row.get("text") or row.get("article") or ""
            if isinstance(value, str) and value.strip():
                out.append(value.strip())
            if len(out) >= limit:
                break
        return out
    except Exception as exc:
        raise BuildError("DownloadFailed", f"{field}: loading dataset {name!r}: {exc}") from exc


# ------------------------------------------------------------------------------------------------
# The stage


def seed_everything(seed: int = SEED) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)


def pick_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(model_dir: Path, device: str) -> Any:
    """The Hugging Face model in its stored dtype, in eval mode, on ``device``."""
    from transformers import AutoModelForCausalLM

    try:
        model: Any = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="auto")
    except MemoryError as exc:
        raise BuildError("HostOutOfMemory", f"loading {model_dir}: {exc}") from exc
    model.eval()
    if device != "cpu":
        try:
            model.to(device)
        except Exception as exc:
            if "out of memory" in str(exc).lower():
                raise BuildError(
                    "GPUOutOfMemory",
                    f"the model does not fit on one {device} GPU for calibration: {exc}",
                ) from exc
            raise
    return model


def calibration_batches(
    model_dir: Path, texts: Sequence[str], batch_size: int, max_seq_length: int
) -> list[dict[str, Any]]:
    """Tokenized batches (``input_ids``, ``attention_mask``), right-padded, truncated."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    batches = []
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start : start + batch_size])
        enc = tokenizer(chunk, return_tensors="pt", padding=True, truncation=True, max_length=max_seq_length)
        batches.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    return batches


def quantize(
    spec: BuildSpec,
    model_dir: Path,
    out_dir: Path,
    progress: ProgressFn,
) -> dict[str, Any]:
    """Calibrate and quantize; write ``out_dir/modelopt_state.pth``. Returns a JSON summary
    (``format``, ``kv_cache_dtype``, ``device``, ``samples``, ``calibration_seconds``,
    ``seconds_per_sample``, ``modelopt``).

    Raises ``RequiresGPU`` (a CUDA-only format on a CPU-only builder), ``GPUOutOfMemory``,
    ``HostOutOfMemory``, ``BadSpec``, ``QuantizationFailed``.
    """
    import modelopt
    import modelopt.torch.opt as mto
    import modelopt.torch.quantization as mtq
    import torch

    q = spec.quantization
    device = pick_device()
    if format_info(q.format).calibration_needs_cuda and device == "cpu":
        raise BuildError(
            "RequiresGPU",
            f"quantization.format {q.format}: ModelOpt calibrates it with CUDA kernels only; run the "
            "builder on a GPU node",
            field="quantization.format",
        )
    config = build_quant_config(q.format, q.kv_cache_dtype, q.awq_block_size, mtq)
    n_samples = calibration_sample_count(spec)
    texts = load_calibration_texts(q.calibration, n_samples)
    seed_everything()
    model = load_model(model_dir, device)
    batches = calibration_batches(model_dir, texts, q.calibration.batch_size, q.calibration.max_seq_length)
    total = len(texts)
    state = {"done": 0, "passes": 0}

    def forward_loop(m: Any) -> None:
        # AWQ and SmoothQuant call the loop more than once (statistics, then search).
        state["done"] = 0
        state["passes"] += 1
        label = "calibrating" if state["passes"] == 1 else f"calibrating (pass {state['passes']})"
        for batch in batches:
            _forward_with_oom_halving(m, batch, device, torch)
            state["done"] += int(batch["input_ids"].shape[0])
            progress(state["done"], total, "samples", label)

    started = time.monotonic()
    try:
        mtq.quantize(model, config, forward_loop=forward_loop)
    except BuildError:
        raise
    except torch.OutOfMemoryError as exc:
        raise BuildError("GPUOutOfMemory", f"calibration: {exc}") from exc
    except MemoryError as exc:
        raise BuildError("HostOutOfMemory", f"calibration: {exc}") from exc
    except AssertionError as exc:
        if "cuda" in str(exc).lower():
            raise BuildError(
                "RequiresGPU", f"quantization.format {q.format}: {exc}", field="quantization.format"
            ) from exc
        raise BuildError("QuantizationFailed", f"ModelOpt: {exc}") from exc
    except Exception as exc:
        raise BuildError("QuantizationFailed", f"ModelOpt: {type(exc).__name__}: {exc}") from exc
    seconds = time.monotonic() - started
    out_dir.mkdir(parents=True, exist_ok=True)
    mto.save(model, str(out_dir / "modelopt_state.pth"))
    summary = {
        "format": q.format,
        "kv_cache_dtype": q.kv_cache_dtype,
        "awq_block_size": q.awq_block_size,
        "device": device,
        "samples": total,
        "batch_size": q.calibration.batch_size,
        "max_seq_length": q.calibration.max_seq_length,
        "calibration_seconds": round(seconds, 3),
        "calibration_passes": state["passes"],
        "seconds_per_sample": round(seconds / total, 6) if total else None,
        "modelopt": getattr(modelopt, "__version__", "unknown"),
        "seed": SEED,
    }
    (out_dir / "quantize.json").write_text(json.dumps(summary, indent=2, sort_keys=True), encoding="utf-8")
    return summary


def _forward_with_oom_halving(model: Any, batch: dict[str, Any], device: str, torch: Any) -> None:
    ids, mask = batch["input_ids"], batch["attention_mask"]
    size = int(ids.shape[0])
    while True:
        try:
            with torch.no_grad():
                for start in range(0, int(ids.shape[0]), size):
                    model(
                        input_ids=ids[start : start + size].to(device),
                        attention_mask=mask[start : start + size].to(device),
                    )
            return
        except torch.OutOfMemoryError:
            if size == 1:
                raise
            size = max(1, size // 2)
            torch.cuda.empty_cache()
