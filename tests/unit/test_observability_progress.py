"""Build progress: the builder's progress line, the operator's parser and the status mapping."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from support.engine_decisions import NOW, good_report, job, observe, pod, prepared

from engine_builder.pipeline import STAGES
from engine_builder.progress import PROGRESS_PREFIX, Progress
from trtllm_operator.decide.engine import EngineObservation, decide_engine
from trtllm_operator.decide.engine_progress import BuildProgress, parse_progress, parse_progress_line

LINE = PROGRESS_PREFIX + ' {"percent": 46.1, "stage": "quantize", "stagePercent": 37.5}'


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (LINE, BuildProgress("quantize", 46)),
        (PROGRESS_PREFIX + ' {"stage": "compile"}', BuildProgress("compile", None)),
        (PROGRESS_PREFIX + ' {"stage": "package", "percent": 100.0}', BuildProgress("package", 100)),
        (PROGRESS_PREFIX + ' {"stage": "fetch", "percent": -3}', BuildProgress("fetch", 0)),
        (PROGRESS_PREFIX + ' {"stage": "fetch", "percent": 250}', BuildProgress("fetch", 100)),
        (PROGRESS_PREFIX + ' {"stage": "fetch", "percent": "12"}', BuildProgress("fetch", None)),
        (PROGRESS_PREFIX + ' {"stage": "fetch", "percent": true}', BuildProgress("fetch", None)),
        ("2026-11-29T19:30:00.1Z " + LINE, BuildProgress("quantize", 46)),  # kubectl logs --timestamps
        ("[quantize]  37.5% (192/512 samples) ETA 21s calibrating", None),  # the human line
        (PROGRESS_PREFIX + ' {"stage": "reticulate", "percent": 5}', None),  # not a builder stage
        (PROGRESS_PREFIX + ' {"stage": "quantize", "perc', None),  # truncated
        (PROGRESS_PREFIX + ' ["quantize", 5]', None),
        (PROGRESS_PREFIX + "{}", None),  # no space after the marker
        ("", None),
    ],
)
def test_parse_progress_line(line: str, expected: BuildProgress | None) -> None:
    assert parse_progress_line(line) == expected


def test_parse_progress_takes_the_newest_valid_line() -> None:
    tail = "\n".join(
        [
            PROGRESS_PREFIX + ' {"stage": "fetch", "percent": 5.0}',
            "[convert] 100.0% converted",
            PROGRESS_PREFIX + ' {"stage": "convert", "percent": 62.5}',
            "Traceback (most recent call last):",
            PROGRESS_PREFIX + ' {"stage": "conv',  # cut by the tail
        ]
    )
    assert parse_progress(tail) == BuildProgress("convert", 62)
    assert parse_progress("") is None
    assert parse_progress(None) is None
    assert parse_progress("no progress here\nat all") is None


def test_builder_prints_lines_the_operator_parses() -> None:
    """The contract end to end: what engine_builder.progress prints, the operator reads."""
    now = [0.0]
    out = io.StringIO()
    progress = Progress(None, STAGES, stream=out, clock=lambda: now[0])
    progress.start("quantize", "calibrating")
    now[0] = 5.0
    progress.update(256, 512, "samples", "calibrating")
    lines = [line for line in out.getvalue().splitlines() if line.startswith(PROGRESS_PREFIX)]
    assert len(lines) == 2  # one per printed human line
    expected = int(100 * (STAGES.index("quantize") + 0.5) / len(STAGES))
    assert parse_progress(out.getvalue()) == BuildProgress("quantize", expected)
    progress.finish("package", "done", 3.0)
    assert parse_progress(out.getvalue()) == BuildProgress(
        "package", int(100 * (STAGES.index("package") + 1) / len(STAGES))
    )


def _running(progress: BuildProgress | None, phase: str = "Running", **kw: Any) -> dict[str, Any]:
    obs: EngineObservation = observe(job=job(), pods=[pod(phase)], progress=progress, **kw)
    return decide_engine(prepared(), obs, now=NOW).status["build"]


@pytest.mark.parametrize(
    ("progress", "phase", "stage", "percent"),
    [
        (BuildProgress("quantize", 46), "Running", "quantize", 46),
        (BuildProgress("compile", None), "Running", "compile", None),
        (None, "Running", "running", None),  # no log (kwok, RBAC, not yet printed): coarse stage
        (None, "Pending", "starting", None),
        (BuildProgress("quantize", 46), "Pending", "starting", None),  # a stale line of an old pod
    ],
)
def test_status_build_stage_and_percent(
    progress: BuildProgress | None, phase: str, stage: str, percent: int | None
) -> None:
    build = _running(progress, phase)
    assert (build["stage"], build["percent"]) == (stage, percent)


def test_progress_changes_post_no_event() -> None:
    """Events follow phase/reason; a moving percent only updates the status."""
    p = prepared()
    first = decide_engine(
        p, observe(job=job(), pods=[pod("Running")], progress=BuildProgress("fetch", 3)), now=NOW
    )
    assert first.event is not None and first.event.reason == "BuildRunning"
    status = {**first.status, "conditions": first.conditions}
    later = decide_engine(
        p,
        observe(job=job(), pods=[pod("Running")], status=status, progress=BuildProgress("compile", 75)),
        now=NOW,
    )
    assert later.event is None
    assert (later.status["build"]["stage"], later.status["build"]["percent"]) == ("compile", 75)


def test_completed_build_is_done_whatever_the_last_line_said() -> None:
    p = prepared()
    done = pod("Succeeded", exit_code=0, message=json.dumps(good_report(p)))
    d = decide_engine(
        p,
        observe(job=job(("Complete", "")), pods=[done], progress=BuildProgress("package", 87)),
        now=NOW,
    )
    assert (d.phase, d.status["build"]["stage"], d.status["build"]["percent"]) == ("Ready", "done", 100)
