"""Build progress from the builder pod's log, pure: log tail in, ``status.build`` stage/percent out.

The builder has no service-account token (by design), so it cannot write the LLMEngine status.
It prints a machine-readable line after each human-readable progress line
(:mod:`engine_builder.progress`)::

    TRTLLM_BUILDER_PROGRESS {"percent": 46.1, "stage": "quantize", "stagePercent": 37.5}

The operator tails the last lines of the running builder pod's log on a timer
(``handlers/engine.py``) and :func:`parse_progress` takes the newest valid line. Anything else in
the log (human lines, tracebacks, a truncated line) is ignored; no valid line means no fine
progress, and the status keeps the coarse stage (``starting`` / ``running``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine_builder.contract import PROGRESS_PREFIX, STAGES


@dataclass(frozen=True)
class BuildProgress:
    """The builder's latest progress: ``stage`` (one of the builder's stages) and ``percent``
    (overall, integer 0-100, None when the builder gave none)."""

    stage: str
    percent: int | None = None

    def status(self) -> dict[str, Any]:
        """The ``status.build`` fields this progress sets."""
        return {"stage": self.stage, "percent": self.percent}


def parse_progress_line(line: str) -> BuildProgress | None:
    """One log line → :class:`BuildProgress`, or None when it is not a valid progress line.

    Valid: ``TRTLLM_BUILDER_PROGRESS`` + JSON object whose ``stage`` is a builder stage and whose
    ``percent`` (optional) is a number; percent is floored and clamped to 0-100. A timestamp
    prefix (``kubectl logs --timestamps``) before the marker is tolerated.
    """
    _, marker, rest = line.partition(PROGRESS_PREFIX + " ")
    if not marker:
        return None
    try:
        data = json.loads(rest.strip())
    except ValueError:
        return None
    if not isinstance(data, Mapping) or data.get("stage") not in STAGES:
        return None
    raw = data.get("percent")
    percent: int | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        percent = max(0, min(100, int(raw)))
    return BuildProgress(stage=str(data["stage"]), percent=percent)


def parse_progress(log_tail: str | None) -> BuildProgress | None:
    """The newest valid progress line of a log tail, or None."""
    for line in reversed((log_tail or "").splitlines()):
        progress = parse_progress_line(line)
        if progress is not None:
            return progress
    return None
