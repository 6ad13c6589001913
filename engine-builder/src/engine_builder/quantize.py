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
the ``[kv]_bmm`` quantizers export as ``INT8``.) AWQ formats calibrate on at most 32 samples (a
larger ``num_samples`` is refused; unset means 32), as TensorRT-LLM clamps them. Calibration data: NVIDIA's
recipe by default (:func:`load_calibration_texts`), exactly ``num_samples`` samples or a refusal,
tokenized into batches that are moved to the GPU once before calibration. Calibration batches that
raise ``torch.OutOfMemoryError`` are retried at half the batch size, as TensorRT-LLM's loop does; at
batch size 1 the failure is ``GPUOutOfMemory``.

The quantized model stays in memory for ``convert`` (no second load) and is also persisted
(:func:`save_quantized`: the ModelOpt state plus the quantization scales when the weights are
unchanged, else ``mto.save``'s whole state dict) so ``convert`` can run in a later process
(:func:`restore_quantized`) — that is what keeps the stage boundary resumable.
Everything is seeded (:data:`SEED`), so a re-run produces the same bytes on the same hardware.
"""

# ruff: noqa: PLC0415 - torch / ModelOpt / transformers load in seconds; imported only when the stage runs, so a bad spec fails in milliseconds.

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine_builder.planner.formats import (
    BUNDLED_CALIBRATION_DATASET,
    CNN_DAILYMAIL_COLUMN,
    CNN_DAILYMAIL_CONFIG,
    DEFAULT_CALIBRATION_DATASET,
    QUANT_FORMAT_TABLE,
    bundled_calibration_texts,
    format_info,
)
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


DATASET_FIELD = "quantization.calibration.dataset"
SAMPLES_FIELD = "quantization.calibration.num_samples"


def load_calibration_texts(calibration: Calibration, count: int, token: str | None = None) -> list[str]:
    """Exactly ``count`` non-empty text samples, the first ones of the source, in order.

    ``calibration.dataset``: ``cnn_dailymail`` (the default; through the ``datasets`` library, config
    ``3.0.0``, ``train`` split, ``article`` column, as TensorRT-LLM's ``get_calib_dataloader`` reads
    it — :mod:`engine_builder.planner.formats`), another Hugging Face dataset name (``text`` column of
    its ``train`` split), a local dataset directory (``train`` split, ``text`` column, as upstream),
    a ``.txt`` (one sample per line, ``#`` lines skipped) or ``.jsonl`` (``text`` field) file, or
    ``bundled`` (package data ``data/calibration.txt``, CC0, offline). Hub datasets are streamed
    (only the first ``count`` rows are downloaded) with ``token`` (the model's credentials).

    Raises ``BadSpec`` naming ``quantization.calibration.num_samples`` when the source holds fewer
    than ``count`` samples (never silently fewer), ``BadSpec`` (``…dataset``) for an unreadable or
    empty local source or a missing ``datasets`` package, ``DownloadFailed`` / ``AuthFailed`` when
    a Hub dataset cannot be fetched.
    """
    source = calibration.dataset
    path = Path(source)
    if source == BUNDLED_CALIBRATION_DATASET:
        samples = bundled_calibration_texts()
    elif path.is_dir():
        samples = _dataset_texts(source, "text", None, count, token, hub=False)
    elif path.suffix in (".txt", ".jsonl") or path.exists():
        samples = _file_texts(path)
    elif DEFAULT_CALIBRATION_DATASET in source:
        # quantize_by_modelopt.py: `elif "cnn_dailymail" in dataset_name_or_dir:` → config 3.0.0, article.
        samples = _dataset_texts(source, CNN_DAILYMAIL_COLUMN, CNN_DAILYMAIL_CONFIG, count, token, hub=True)
    else:
        samples = _dataset_texts(source, "text", None, count, token, hub=True)
    if len(samples) < count:
        offline = (
            f", or dataset {DEFAULT_CALIBRATION_DATASET} (NVIDIA's default, needs network access)"
            if source == BUNDLED_CALIBRATION_DATASET
            else ""
        )
        raise BuildError(
            "BadSpec",
            f"{SAMPLES_FIELD}: {count} calibration samples requested but dataset {source!r} holds only "
            f"{len(samples)}; set num_samples to {len(samples)} or less, or use a larger dataset{offline}",
            field=SAMPLES_FIELD,
        )
    return samples[:count]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _file_texts(path: Path) -> list[str]:
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BuildError(
            "BadSpec", f"{DATASET_FIELD}: cannot read {path}: {exc}", field=DATASET_FIELD
        ) from exc
    if path.suffix != ".jsonl":
        return _lines(raw)
    samples = []
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise BuildError(
                "BadSpec", f"{DATASET_FIELD}: {path}:{n}: not JSON", field=DATASET_FIELD
            ) from exc
        if isinstance(record, dict) and isinstance(record.get("text"), str) and record["text"].strip():
            samples.append(record["text"].strip())
    return samples


def _dataset_texts(
    name: str, column: str, config: str | None, count: int, token: str | None, *, hub: bool
) -> list[str]:
    """The first ``count`` non-empty values of ``column`` in the ``train`` split of a dataset."""
    offline = (
        f"or set {DATASET_FIELD} to '{BUNDLED_CALIBRATION_DATASET}' (the offline text set shipped with "
        "the builder) or a local file"
    )
    try:
        import datasets  # type: ignore[import-untyped]
    except ImportError as exc:
        raise BuildError(
            "BadSpec",
            f"{DATASET_FIELD}: {name!r} needs the `datasets` package, which this builder image lacks; "
            f"use an image with it (TensorRT-LLM's quantize_by_modelopt.py needs it too) {offline}",
            field=DATASET_FIELD,
        ) from exc
    out: list[str] = []
    try:
        ds = datasets.load_dataset(name, config, split="train", streaming=hub, token=token if hub else None)
        for row in ds:
            value = row.get(column)
            if isinstance(value, str) and value.strip():
                out.append(value.strip())
            if len(out) >= count:
                break
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        if not hub:
            raise BuildError(
                "BadSpec", f"{DATASET_FIELD}: reading dataset {name}: {detail}", field=DATASET_FIELD
            ) from exc
        lowered = detail.lower()
        auth = any(s in lowered for s in ("401", "403", "gated", "unauthorized", "authentication"))
        raise BuildError(
            "AuthFailed" if auth else "DownloadFailed",
            f"{DATASET_FIELD}: cannot load calibration dataset {name!r} from the Hugging Face Hub "
            f"({'with' if token else 'without'} the model's token): {detail}. Give the builder network "
            f"access to the Hub (or a mirror through HF_ENDPOINT) {offline}",
            field=DATASET_FIELD,
        ) from exc
    if not out:
        raise BuildError(
            "BadSpec", f"{DATASET_FIELD}: {name} has no text in column {column!r}", field=DATASET_FIELD
        )
    return out


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
    model_dir: Path, texts: Sequence[str], batch_size: int, max_seq_length: int, device: str = "cpu"
) -> list[dict[str, Any]]:
    """Tokenized batches (``input_ids``, ``attention_mask``) of ``batch_size`` samples, truncated at
    ``max_seq_length`` tokens, left-padded to the batch's longest sample, on ``device`` — all of
    them moved there once, before calibration, as TensorRT-LLM's ``get_calib_dataloader`` does
    (``get_tokenizer(padding_side="left")``, ``batch_encoded.to(device)``; quantize_by_modelopt.py
    TL@585c7565). Upstream pads the whole set to its longest sample; per-batch padding forwards the
    same real tokens and fewer pad tokens."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    batches = []
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start : start + batch_size])
        enc = tokenizer(chunk, return_tensors="pt", padding=True, truncation=True, max_length=max_seq_length)
        batches.append(
            {"input_ids": enc["input_ids"].to(device), "attention_mask": enc["attention_mask"].to(device)}
        )
    return batches


def calibration_tokens(batches: Sequence[dict[str, Any]]) -> int:
    """Real (not padding) tokens in the batches: the sum of their attention masks."""
    return sum(int(b["attention_mask"].sum()) for b in batches)


def forward_kwargs(model: Any) -> dict[str, Any]:
    """Extra arguments for a calibration forward pass: ``use_cache=False`` (no KV cache is built)
    and, where the model's ``forward`` takes it, ``logits_to_keep=1`` (transformers computes the
    ``lm_head`` logits of the last position only; every quantization config here disables the
    ``*lm_head*`` quantizers, so no calibrated statistic reads those logits)."""
    import inspect

    kwargs: dict[str, Any] = {"use_cache": False}
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        kwargs["logits_to_keep"] = 1
    return kwargs


def quantize(
    spec: BuildSpec,
    model_dir: Path,
    out_dir: Path,
    progress: ProgressFn,
    token: str | None = None,
) -> tuple[dict[str, Any], Any]:
    """Calibrate and quantize; persist the result for a later process (:func:`save_quantized`).
    Returns a JSON summary (``format``, ``kv_cache_dtype``, ``device``, ``dataset``, ``samples``,
    ``tokens`` (real tokens forwarded per calibration pass), ``batch_size``, ``max_seq_length``,
    ``load_seconds``, ``calibration_seconds``, ``save_seconds``, ``state`` (``scales`` or ``full``),
    ``seconds_per_sample``, ``modelopt``) and the quantized model, still on its device, for
    ``convert`` to export without loading it again.

    Raises ``RequiresGPU`` (a CUDA-only format on a CPU-only builder), ``GPUOutOfMemory``,
    ``HostOutOfMemory``, ``BadSpec``, ``DownloadFailed``, ``AuthFailed``, ``QuantizationFailed``.
    """
    import modelopt
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
    texts = load_calibration_texts(q.calibration, q.calibration_samples, token)
    seed_everything()
    started = time.monotonic()
    model = load_model(model_dir, device)
    load_seconds = time.monotonic() - started
    batches = calibration_batches(
        model_dir, texts, q.calibration.batch_size, q.calibration.max_seq_length, device
    )
    tokens = calibration_tokens(batches)
    total = len(texts)
    state = {"done": 0, "passes": 0}
    extra = forward_kwargs(model)

    def forward_loop(m: Any) -> None:
        # AWQ and SmoothQuant call the loop more than once (statistics, then search).
        state["done"] = 0
        state["passes"] += 1
        label = "calibrating" if state["passes"] == 1 else f"calibrating (pass {state['passes']})"
        for batch in batches:
            _forward_with_oom_halving(m, batch, extra, torch)
            state["done"] += int(batch["input_ids"].shape[0])
            progress(state["done"], total, "samples", label)

    base_keys = set(model.state_dict())
    started = time.monotonic()
    try:
        mtq.quantize(model, config, forward_loop=forward_loop)
        if device != "cpu":
            torch.cuda.synchronize()
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
    batches.clear()  # the calibration tensors leave the GPU
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    kind = save_quantized(model, out_dir / STATE_FILE, base_keys, weights_unchanged(config))
    save_seconds = time.monotonic() - started
    summary = {
        "format": q.format,
        "kv_cache_dtype": q.kv_cache_dtype,
        "awq_block_size": q.awq_block_size,
        "device": device,
        "dataset": q.calibration.dataset,
        "samples": total,
        "tokens": tokens,
        "batch_size": q.calibration.batch_size,
        "max_seq_length": q.calibration.max_seq_length,
        "load_seconds": round(load_seconds, 3),
        "calibration_seconds": round(seconds, 3),
        "save_seconds": round(save_seconds, 3),
        "state": kind,
        "calibration_passes": state["passes"],
        "seconds_per_sample": round(seconds / total, 6) if total else None,
        "modelopt": getattr(modelopt, "__version__", "unknown"),
        "seed": SEED,
    }
    (out_dir / "quantize.json").write_text(json.dumps(summary, indent=2, sort_keys=True), encoding="utf-8")
    return summary, model


def _forward_with_oom_halving(model: Any, batch: dict[str, Any], extra: dict[str, Any], torch: Any) -> None:
    ids, mask = batch["input_ids"], batch["attention_mask"]
    size = int(ids.shape[0])
    while True:
        try:
            with torch.no_grad():
                for start in range(0, int(ids.shape[0]), size):
                    model(
                        input_ids=ids[start : start + size],
                        attention_mask=mask[start : start + size],
                        **extra,
                    )
            return
        except torch.OutOfMemoryError:
            if size == 1:
                raise
            size = max(1, size // 2)
            torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------
# The persisted result (what a resumed ``convert`` restores)

#: The file ``quantize`` writes in its output directory.
STATE_FILE = "modelopt_state.pth"


def weights_unchanged(config: dict[str, Any]) -> bool:
    """True when the config's calibration algorithm leaves the model's weights as loaded: ``max``
    (ModelOpt's default when ``algorithm`` is unset) only collects ``amax`` statistics into the
    quantizers (modelopt/torch/quantization/model_calib.py ``max_calibrate``, 0.47.0). SmoothQuant
    and AWQ rescale weights, so their whole state dict is kept."""
    algorithm = config.get("algorithm")
    method = algorithm.get("method") if isinstance(algorithm, dict) else algorithm
    return method in (None, "max")


def save_quantized(model: Any, path: Path, base_keys: set[str], only_new: bool) -> str:
    """Write the quantized model's ModelOpt state and tensors to ``path``; returns ``scales`` or ``full``.

    ``full`` is ``mto.save`` (ModelOpt state + the whole state dict). ``scales`` (when the weights
    are unchanged, :func:`weights_unchanged`) keeps the ModelOpt state and only the tensors
    quantization added (state-dict keys not in ``base_keys``, the model's keys before
    ``mtq.quantize``: amax and scales); :func:`restore_quantized` loads the weights from the source
    checkpoint again — the split ``modelopt.torch.opt.conversion.modelopt_state`` /
    ``restore_from_modelopt_state`` documents (nvidia-modelopt 0.47.0). Kilobytes instead of the
    model's size."""
    import modelopt.torch.opt as mto
    import torch

    if not only_new:
        mto.save(model, str(path))
        return "full"
    added = {k: v.detach().cpu() for k, v in model.state_dict().items() if k not in base_keys}
    torch.save(
        {"modelopt_state": mto.modelopt_state(model), "model_state_dict": added, "scales_only": True}, path
    )
    return "scales"


def restore_quantized(model: Any, path: Path) -> Any:
    """Apply what :func:`save_quantized` wrote to ``model`` (freshly loaded from the source
    checkpoint). Raises ``ValueError`` when the saved tensors do not match the model's keys."""
    import modelopt.torch.opt as mto
    import torch

    # weights_only=True: the state is read without unpickling arbitrary objects, so a
    # modelopt_state.pth written by anyone else who can write the work volume (another engine's
    # builder on a shared PVC) cannot run code here. ModelOpt 0.47 passes the keyword to torch.load
    # (modelopt/torch/opt/conversion.py ``restore`` → torch/utils/serialization.py ``safe_load``); an
    # explicit value is not overridden by TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD (torch 2.11
    # torch/serialization.py ``load``).
    saved = torch.load(str(path), map_location="cpu", weights_only=True)
    if not saved.get("scales_only"):
        return mto.restore(model, str(path), weights_only=True)
    source_keys = set(model.state_dict())
    model = mto.restore_from_modelopt_state(model, saved["modelopt_state"])
    result = model.load_state_dict(saved["model_state_dict"], strict=False)
    # Every key left unloaded must be a source weight (loaded from the checkpoint already).
    missing = sorted(set(result.missing_keys) - source_keys)
    if result.unexpected_keys or missing:
        raise ValueError(
            f"the saved quantization tensors do not match the model: unexpected "
            f"{list(result.unexpected_keys)[:5]}, missing {missing[:5]}"
        )
    return model
