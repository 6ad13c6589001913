"""Progress: printed lines for the Job log and ``<workdir>/progress.json`` for the operator.

``progress.json`` (rewritten atomically, at most every ``min_interval_s`` seconds plus at every
stage boundary)::

    {"stage": "quantize", "stageIndex": 4, "stageCount": 8, "stagePercent": 37.5,
     "percent": 46.1, "done": 192, "total": 512, "unit": "samples", "etaSeconds": 21.0,
     "message": "calibrating", "updatedAt": "2026-11-29T19:30:00Z"}

``percent`` is the overall progress counting every stage as an equal share (a rough but monotonic
figure); ``etaSeconds`` is for the current stage only, extrapolated from its measured rate, and
absent where nothing is measurable (e.g. ``trtllm-build``).

Each printed progress line is followed by one machine-readable line for the operator, which tails
the builder pod's log (the builder has no service-account token, so it cannot write status)::

    TRTLLM_BUILDER_PROGRESS {"percent": 46.1, "stage": "quantize", "stagePercent": 37.5}

:data:`PROGRESS_PREFIX`, one space, then a JSON object with ``stage`` and, when known, ``percent``
(overall, 0-100) and ``stagePercent``. The format is a contract with the operator
(``trtllm_operator.decide.engine_progress``): add keys, never rename them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from engine_builder.contract import PROGRESS_PREFIX
from engine_builder.redaction import redact


def progress_line(state: dict[str, Any]) -> str:
    """The machine-readable line for a progress ``state`` (see the module docstring)."""
    keys = ("stage", "percent", "stagePercent")
    return PROGRESS_PREFIX + " " + json.dumps({k: state[k] for k in keys if k in state}, sort_keys=True)


class Progress:
    """Reports stage progress. ``clock`` is injectable for tests (seconds, monotonic)."""

    def __init__(
        self,
        path: Path | None,
        stages: tuple[str, ...],
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        min_interval_s: float = 0.5,
    ) -> None:
        self.path = path
        self.stages = stages
        self.stream = stream if stream is not None else sys.stdout
        self.clock = clock
        self.min_interval_s = min_interval_s
        self.stage = ""
        self._stage_started = 0.0
        self._last_write = -1e9
        self._last_printed_percent = -1.0
        self.state: dict[str, Any] = {}

    def start(self, stage: str, message: str = "") -> None:
        self.stage = stage
        self._stage_started = self.clock()
        self._last_printed_percent = -1.0
        self._emit(0, None, "", message, force=True)

    def update(self, done: float, total: float | None, unit: str = "", message: str = "") -> None:
        """Report ``done`` of ``total`` units (samples, bytes, files) of the current stage."""
        self._emit(done, total, unit, message, force=False)

    def finish(self, stage: str, status: str, seconds: float) -> None:
        self.stage = stage
        self._emit(1, 1, "", f"{status} in {seconds:.1f}s", force=True)

    def _emit(self, done: float, total: float | None, unit: str, message: str, *, force: bool) -> None:
        now = self.clock()
        stage_percent = None
        eta = None
        if total:
            stage_percent = max(0.0, min(100.0, 100.0 * done / total))
            elapsed = now - self._stage_started
            if 0 < done < total and elapsed > 0:
                eta = elapsed * (total - done) / done
            elif done >= total:
                eta = 0.0
        index = self.stages.index(self.stage) + 1 if self.stage in self.stages else 0
        overall = None
        if index:
            overall = 100.0 * ((index - 1) + (stage_percent or 0.0) / 100.0) / len(self.stages)
        self.state = {
            "stage": self.stage,
            "stageIndex": index,
            "stageCount": len(self.stages),
            "stagePercent": None if stage_percent is None else round(stage_percent, 1),
            "percent": None if overall is None else round(overall, 1),
            "done": done if total else None,
            "total": total,
            "unit": unit or None,
            "etaSeconds": None if eta is None else round(eta, 1),
            "message": redact(message) if message else None,
            "updatedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        self.state = {k: v for k, v in self.state.items() if v is not None}
        printable = force or (
            stage_percent is not None and stage_percent - self._last_printed_percent >= 10.0
        )
        if printable:
            self._last_printed_percent = stage_percent if stage_percent is not None else -1.0
            parts = [f"[{self.stage}]"]
            if stage_percent is not None:
                parts.append(f"{stage_percent:5.1f}%")
                if unit:
                    parts.append(f"({_fmt(done)}/{_fmt(total)} {unit})")
            if eta is not None and stage_percent is not None and stage_percent < 100:
                parts.append(f"ETA {eta:.0f}s")
            if message:
                parts.append(redact(message))
            print(" ".join(parts), file=self.stream, flush=True)
            print(progress_line(self.state), file=self.stream, flush=True)
        if self.path is not None and (force or now - self._last_write >= self.min_interval_s):
            self._last_write = now
            _atomic_write_json(self.path, self.state)


def _fmt(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
