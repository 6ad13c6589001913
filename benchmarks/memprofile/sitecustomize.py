"""Memory profile of the operator process for benchmarks/scale.py ``--tracemalloc`` (not part of the
operator): on the path only when that flag is given (``PYTHONPATH``), so Python imports it at start
(the ``site`` module imports ``sitecustomize``). On SIGUSR1 it starts :mod:`tracemalloc` with
``TRTLLM_BENCH_TRACEMALLOC_FRAMES`` frames (the benchmark sends it just before the burst: tracing
the imports made the operator's start take minutes); on SIGUSR2 it writes the live allocations
made since, grouped by the innermost frame of the operator's or kopf's own code (else the innermost
frame), as JSON lines to ``TRTLLM_BENCH_TRACEMALLOC``: what holds the memory the objects cost."""

from __future__ import annotations

import json
import os
import signal
import tracemalloc
from collections import Counter
from types import FrameType

_OUT = os.environ.get("TRTLLM_BENCH_TRACEMALLOC")
_OURS = ("trtllm_operator", "engine_builder", "kopf")


def _site(frames: tracemalloc.Traceback) -> str:
    """The first (innermost) frame in the operator's, the builder's or kopf's code, else the innermost."""
    for frame in reversed(frames):  # tracemalloc orders a traceback from the oldest frame
        if any(f"/{p}/" in frame.filename for p in _OURS):
            return f"{frame.filename.split('site-packages/')[-1].split('/src/')[-1]}:{frame.lineno}"
    frame = frames[-1]
    return f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}"


def _dump(_signum: int, _frame: FrameType | None) -> None:
    assert _OUT
    if not tracemalloc.is_tracing():
        return
    snapshot = tracemalloc.take_snapshot()
    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for stat in snapshot.statistics("traceback"):
        site = _site(stat.traceback)
        sizes[site] += stat.size
        counts[site] += stat.count
    traced, peak = tracemalloc.get_traced_memory()
    with open(_OUT, "w") as out:
        out.write(json.dumps({"traced_bytes": traced, "peak_traced_bytes": peak}) + "\n")
        for site, size in sizes.most_common(25):
            out.write(json.dumps({"site": site, "bytes": size, "blocks": counts[site]}) + "\n")


def _start(_signum: int, _frame: FrameType | None) -> None:
    if not tracemalloc.is_tracing():
        tracemalloc.start(int(os.environ.get("TRTLLM_BENCH_TRACEMALLOC_FRAMES", "12")))


if _OUT:
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _dump)
