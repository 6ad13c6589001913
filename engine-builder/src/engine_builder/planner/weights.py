"""The planner's only I/O: read ``config.json`` and count real parameters from safetensors headers.

:func:`cross_check_safetensors` opens every ``*.safetensors`` file in a model directory with the
``safetensors`` library and reads only the headers (tensor names, dtypes and shapes; no tensor data
is loaded), then compares the total with :meth:`Architecture.params_total`. A large difference means
the ``config.json`` does not describe the weights (a wrong revision, a multimodal checkpoint, extra
multi-token-prediction layers as in DeepSeek-V3), so the plan should not be trusted as is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetensors import safe_open

from engine_builder.planner.architecture import Architecture
from engine_builder.planner.errors import PlanInputError


@dataclass(frozen=True)
class WeightsCheck:
    """Planner count vs. safetensors count.

    ``expected_params``: :meth:`Architecture.params_total`; ``actual_params``: sum of element counts
    over all tensors in the checkpoint; ``difference`` = actual − expected; ``relative_difference`` =
    difference / expected; ``files``: safetensors files read; ``dtypes``: element count per stored
    dtype (``BF16``, ``F8_E4M3`` …); ``ok``: |relative difference| ≤ ``tolerance``.
    """

    expected_params: int
    actual_params: int
    difference: int
    relative_difference: float
    tolerance: float
    ok: bool
    files: tuple[str, ...]
    dtypes: Mapping[str, int] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "expected_params": self.expected_params,
            "actual_params": self.actual_params,
            "difference": self.difference,
            "relative_difference": self.relative_difference,
            "tolerance": self.tolerance,
            "ok": self.ok,
            "files": list(self.files),
            "dtypes": dict(self.dtypes),
        }


def load_hf_config(path: str | Path) -> dict[str, Any]:
    """Read a ``config.json`` (a file, or a model directory containing one).

    Raises :class:`PlanInputError` (field ``config.json``) when it is missing or not a JSON object.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PlanInputError("config.json", f"{p} does not exist; pass the model's config.json") from exc
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanInputError("config.json", f"cannot read {p} as JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PlanInputError("config.json", f"{p} is not a JSON object")
    return data


def cross_check_safetensors(
    arch: Architecture, model_dir: str | Path, tolerance: float = 0.01
) -> WeightsCheck:
    """Count parameters in ``model_dir``'s safetensors headers and compare with ``arch``.

    Packed low-bit checkpoints (4-bit weights stored two per byte) report stored elements, so compare
    unquantized checkpoints. Raises :class:`PlanInputError` (field ``model_dir``) when the directory
    holds no ``*.safetensors`` file.
    """
    directory = Path(model_dir)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise PlanInputError("model_dir", f"no *.safetensors files in {directory}")
    total = 0
    dtypes: dict[str, int] = {}
    for f in files:
        with safe_open(str(f), framework="numpy") as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open is not a dict)
                sl = handle.get_slice(name)
                n = math.prod(sl.get_shape())
                total += n
                dtype = str(sl.get_dtype())
                dtypes[dtype] = dtypes.get(dtype, 0) + n
    expected = arch.params_total()
    diff = total - expected
    rel = diff / expected if expected else 0.0
    return WeightsCheck(
        expected_params=expected,
        actual_params=total,
        difference=diff,
        relative_difference=rel,
        tolerance=tolerance,
        ok=abs(rel) <= tolerance,
        files=tuple(f.name for f in files),
        dtypes=dtypes,
    )
