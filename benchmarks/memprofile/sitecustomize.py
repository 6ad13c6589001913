"""Memory profile of the operator process for benchmarks/scale.py ``--tracemalloc`` and
``--memory-stats`` (not part of the operator): on the path only when one of those flags is given
(``PYTHONPATH``), so Python imports it at start (the ``site`` module imports ``sitecustomize``).

``--tracemalloc``: on SIGUSR1 it starts :mod:`tracemalloc` with ``TRTLLM_BENCH_TRACEMALLOC_FRAMES``
frames (the benchmark sends it just before the burst: tracing the imports made the operator's start
take minutes); on SIGUSR2 it writes the live allocations made since, grouped by the innermost frame
of the operator's or kopf's own code (else the innermost frame), as JSON lines to
``TRTLLM_BENCH_TRACEMALLOC``: what holds the memory the objects cost.

``--memory-stats``: a thread appends, every 2 s, one JSON line to ``TRTLLM_BENCH_MEMSTATS``: the
process's RSS and its file-backed part (/proc/self/status), glibc malloc's bytes in use, free and
mmapped over all its arenas (``mallinfo2``, glibc >= 2.33), and pymalloc's arenas, bytes in use and
free (``sys._debugmallocstats``, which CPython writes to file descriptor 2: redirected to a temporary
file for the call, and whatever else was written meanwhile copied back). So an RSS peak splits into
live Python objects, memory the allocators hold free (fragmentation), and the rest."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from types import FrameType
from typing import Any

_OUT = os.environ.get("TRTLLM_BENCH_TRACEMALLOC")
_MEMSTATS = os.environ.get("TRTLLM_BENCH_MEMSTATS")
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


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


def _status_kib() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssFile"):
                out[key] = int(value.split()[0])
    return out


#: ``sys._debugmallocstats`` lines read (CPython 3.11: ``# arenas allocated current``, ...).
_PYMALLOC = {
    "# arenas allocated current": "pymalloc_arenas_count",
    "Total": "pymalloc_arenas",
    "# bytes in allocated blocks": "pymalloc_used",
    "# bytes in available blocks": "pymalloc_free",
}


def _pymalloc() -> dict[str, int]:
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    out: dict[str, int] = {}
    others: list[str] = []
    in_stats = False
    for line in text.splitlines():
        if line.startswith("Small block threshold"):
            in_stats = True
        ours = not line.strip() or "arena map" in line or (" free " in line and "each =" in line)
        if in_stats:
            for prefix, key in _PYMALLOC.items():
                if line.startswith(prefix) and key not in out:
                    out[key] = int(line.split("=")[-1].strip().replace(",", ""))
            if line.startswith("Total"):
                in_stats = False
        elif not ours and not line.startswith("Total"):
            others.append(line)  # another thread's output while fd 2 was redirected
    if others:
        os.write(2, ("\n".join(others) + "\n").encode())
    return out


def _memstats_loop(path: str) -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    with open(path, "a", buffering=1) as out:
        while True:
            kib = _status_kib()
            mi = libc.mallinfo2()
            sample: dict[str, Any] = {
                "t": time.time(),
                "rss": kib["VmRSS"] * 1024,
                "file": kib["RssFile"] * 1024,
                "glibc_used": mi.uordblks,
                "glibc_free": mi.fordblks,
                "glibc_mmap": mi.hblkhd,
                **_pymalloc(),
            }
            out.write(json.dumps(sample) + "\n")
            time.sleep(2)


if _OUT:
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _dump)
if _MEMSTATS:
    threading.Thread(target=_memstats_loop, args=(_MEMSTATS,), name="bench-memstats", daemon=True).start()
