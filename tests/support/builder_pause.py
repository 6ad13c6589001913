"""``engine-builder`` that stops in its quantize stage until a test signals it (issue 23: no poll racing
the stage's end).

``python -m support.builder_pause PAUSED ARGS…``, with tests/ on ``PYTHONPATH`` (not as a script:
tests/support/operator.py would then shadow the standard library's ``operator``), runs
``engine_builder.cli.main(ARGS)`` with one change, made here and not in the builder: the quantize
stage's first progress report with a calibration sample done
(:meth:`engine_builder.pipeline.Context.report_progress`, called from the calibration loop of
:func:`engine_builder.quantize.quantize` after each batch) creates the file ``PAUSED`` and then sleeps,
inside the calibration loop, for up to :data:`PAUSE_SECONDS`. A test waits for ``PAUSED`` and sends its
signal: the builder cannot leave quantize before it. The builder's SIGTERM handler raises out of the
sleep as it would out of a forward pass; SIGKILL ends the process where it stands. Without a signal the
build goes on after the pause, as an unpaused one would.

Used by tests/unit/test_builder_pipeline.py's ``signalled_in_quantize``; the resumed run there is the
plain ``python -m engine_builder.cli``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from engine_builder import cli, pipeline

#: How long the paused builder waits for the signal before it goes on.
PAUSE_SECONDS = 300.0


def pause_in_quantize(paused: Path) -> None:
    """Patch :class:`engine_builder.pipeline.Context` so that the quantize stage pauses (module
    docstring) once, creating ``paused``."""
    report = pipeline.Context.report_progress

    def report_then_pause(
        self: pipeline.Context, done: float, total: float | None, unit: str, message: str
    ) -> None:
        report(self, done, total, unit, message)
        if self.current == "quantize" and done > 0 and not paused.exists():
            paused.touch()
            time.sleep(PAUSE_SECONDS)

    pipeline.Context.report_progress = report_then_pause  # type: ignore[method-assign]


if __name__ == "__main__":
    pause_in_quantize(Path(sys.argv[1]))
    sys.exit(cli.main(sys.argv[2:]))
