"""Errors and issues the planner reports.

Two kinds of problems, kept apart on purpose:

* :class:`PlanInputError` — the input cannot be read at all (a ``config.json`` field is missing, the
  architecture is unknown, the GPU product is not in the catalog). Raised; the CLI maps it to exit
  code 2.
* :class:`PlanIssue` — the input is readable but the combination is invalid for the target (FP8 on an
  Ampere GPU, tensor parallelism not dividing the attention heads). Returned as a list by
  :func:`engine_builder.planner.validate`, so the operator can put every problem on a condition at once.

Both name the offending field (a ``config.json`` key, or the Kubernetes API path such as
``spec.parallelism.tensor``) and say how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


class PlanInputError(ValueError):
    """Input the planner cannot use.

    ``field`` is the ``config.json`` key (e.g. ``num_key_value_heads``) or the API path of the spec
    field (e.g. ``spec.gpu.product``); ``message`` says what is wrong and how to fix it.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class PlanIssue:
    """One problem. ``field`` is the API path (camelCase), ``message`` what is wrong, ``fix`` what to do.

    ``kind``: ``invalid`` for a rule violation (bad input: the CLI exits 2, the operator sets a
    condition) or ``capacity`` for "valid but does not fit in memory" (CLI exit 3).
    """

    field: str
    message: str
    fix: str
    kind: Literal["invalid", "capacity"] = "invalid"

    def to_json_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message, "fix": self.fix, "kind": self.kind}

    def __str__(self) -> str:
        return f"{self.field}: {self.message} Fix: {self.fix}"
