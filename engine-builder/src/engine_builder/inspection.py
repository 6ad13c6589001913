"""``inspect``: what model is this? ``config.json`` + safetensors headers, no weights loaded.

Uses the planner's :class:`~engine_builder.planner.Architecture` (the one reading of
``config.json`` shared with the operator) and
:func:`~engine_builder.planner.cross_check_safetensors` (parameter count and stored dtypes from
the headers). Refuses an unsupported ``model_type`` with ``UnsupportedArchitecture`` listing the
supported ones, and a checkpoint without a tokenizer (the Triton pre/post-processing models need
one) with ``ModelNotFound``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine_builder.planner import (
    SUPPORTED_MODEL_TYPES,
    Architecture,
    PlanInputError,
    cross_check_safetensors,
)
from engine_builder.report import BuildError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def read_hf_config(model_dir: Path) -> dict[str, Any]:
    """``config.json`` as a dict. Raises ``ModelNotFound`` if absent or unreadable."""
    path = model_dir / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BuildError("ModelNotFound", f"{path} does not exist", field="model.uri") from exc
    except (OSError, ValueError) as exc:
        raise BuildError("ModelNotFound", f"{path} is not readable JSON: {exc}", field="model.uri") from exc
    if not isinstance(data, dict):
        raise BuildError("ModelNotFound", f"{path} is not a JSON object", field="model.uri")
    return data


def inspect_model(model_dir: Path) -> dict[str, Any]:
    """Summary of the checkpoint in ``model_dir`` as plain JSON data.

    Keys: ``model_type``, ``architectures``, ``torch_dtype``, ``num_hidden_layers``,
    ``num_attention_heads``, ``num_key_value_heads``, ``hidden_size``, ``vocab_size``,
    ``params_total`` (from the headers), ``params_expected`` (from config.json), ``dtypes`` (element
    count per stored dtype), ``weights_ok``, ``files``, ``tokenizer_files``.
    """
    hf_config = read_hf_config(model_dir)
    try:
        arch = Architecture.from_hf_config(hf_config)
    except PlanInputError as exc:
        if exc.field in ("model_type", "config.json", "architectures"):
            raise BuildError(
                "UnsupportedArchitecture",
                f"{exc.message} (supported model_type values: {', '.join(sorted(SUPPORTED_MODEL_TYPES))})",
                field="model.uri",
            ) from exc
        raise BuildError(
            "UnsupportedArchitecture", f"config.json field {exc.field}: {exc.message}", field="model.uri"
        ) from exc
    try:
        check = cross_check_safetensors(arch, model_dir)
    except PlanInputError as exc:
        raise BuildError(
            "ModelNotFound",
            f"{model_dir}: {exc.message} (only safetensors checkpoints are supported)",
            field="model.uri",
        ) from exc
    tokenizer_files = sorted(p.name for p in model_dir.iterdir() if p.name in TOKENIZER_FILES)
    if not tokenizer_files:
        raise BuildError(
            "ModelNotFound",
            f"{model_dir}: no tokenizer ({' / '.join(TOKENIZER_FILES)}); the Triton pre/post-processing "
            "models need one",
            field="model.uri",
        )
    text = hf_config.get("text_config") if isinstance(hf_config.get("text_config"), dict) else hf_config
    assert isinstance(text, dict)
    return {
        "model_type": hf_config.get("model_type"),
        "architectures": list(hf_config.get("architectures") or []),
        "torch_dtype": hf_config.get("torch_dtype") or hf_config.get("dtype"),
        "num_hidden_layers": text.get("num_hidden_layers"),
        "num_attention_heads": text.get("num_attention_heads"),
        "num_key_value_heads": text.get("num_key_value_heads", text.get("num_attention_heads")),
        "hidden_size": text.get("hidden_size"),
        "intermediate_size": text.get("intermediate_size"),
        "vocab_size": text.get("vocab_size"),
        "params_total": check.actual_params,
        "params_expected": check.expected_params,
        "weights_ok": check.ok,
        "dtypes": dict(sorted(check.dtypes.items())),
        "files": list(check.files),
        "tokenizer_files": tokenizer_files,
    }
