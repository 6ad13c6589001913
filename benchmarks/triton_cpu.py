"""Start time and memory of one real Triton server with the CPU stand-in, per serving shape.

For each shape the tiny Llama is built with the real engine-builder (as in tests/fidelity), the
operator's model repository is rendered and its ``launch.sh`` run (``tritoncpu.run_launch_script``),
and we measure:

* seconds from start to ``/v2/health/ready`` (server + Python stubs + checkpoint load);
* memory of every process of the server's session (``mpirun``, each ``tritonserver`` rank, each
  Python-backend stub): the sum of RSS and the sum of PSS (``/proc/<pid>/smaps_rollup``; shared
  library pages counted once), idle after one request.

    .venv/bin/python benchmarks/triton_cpu.py [--repeat N]

Prints a Markdown table (paste it into benchmarks/RESULTS.md). Runs servers one at a time on a
loopback address of its own; stops each by PID.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "hack"), str(ROOT / "tests")]

import tritoncpu  # noqa: E402
from support.fidelity import build, deployment_doc, post  # noqa: E402

from engine_builder.tinymodel import make_tiny_model  # noqa: E402
from trtllm_operator.decide.serving_params import serving_params  # noqa: E402
from trtllm_operator.render.model_repository import desired_model_repository, volume_items  # noqa: E402

SHAPES = [("tensorrt", "fp8", 2, True), ("tensorrt", "none", 1, False), ("pytorch", "none", 1, False)]


def session_memory(sid: int) -> tuple[int, int, int]:
    """(processes, RSS bytes, PSS bytes) of the live processes of session ``sid``."""
    rss = pss = n = 0
    for member, _ in tritoncpu._session(sid):
        try:
            for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
            n += 1
        except OSError:
            continue
    return n, rss, pss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    tritoncpu.runtime()
    with tempfile.TemporaryDirectory(prefix="bench-triton-") as tmp:
        volumes = Path(tmp) / "volumes"
        make_tiny_model(volumes / "models" / "tiny-llama")
        rows = []
        for i, (backend, fmt, tp, decoupled) in enumerate(SHAPES):
            built = build(volumes, backend, fmt, tp)
            params = serving_params(deployment_doc(built.engine, decoupled), built.engine, gpus_per_node=8)
            configmap = desired_model_repository(params)
            starts, mems = [], []
            for r in range(args.repeat):
                address = f"127.{150 + os.getpid() % 50}.{i}.{r + 1}"
                t0 = time.monotonic()
                server = tritoncpu.run_launch_script(
                    configmap["data"],
                    volume_items(configmap),
                    built.artifact,
                    address=address,
                    work_dir=Path(tmp) / f"{backend}-{fmt}-{r}",
                )
                try:
                    server.wait_ready(timeout=600)
                    starts.append(time.monotonic() - t0)
                    if backend == "pytorch":
                        post(
                            f"{server.url}/v2/models/tensorrt_llm/generate",
                            {"text_input": "hello", "sampling_param_max_tokens": 8},
                        )
                    else:
                        post(
                            f"{server.url}/v2/models/ensemble/generate",
                            {"text_input": "hello", "max_tokens": 8},
                        )
                    time.sleep(1)
                    mems.append(session_memory(server.pid))
                finally:
                    server.stop()
            procs = mems[-1][0]
            rows.append(
                f"| {backend}, {fmt}, TP {tp} | {procs} | {statistics.median(starts):.1f} s "
                f"({min(starts):.1f}–{max(starts):.1f}) | "
                f"{statistics.median(m[1] for m in mems) / 2**20:.0f} MiB | "
                f"{statistics.median(m[2] for m in mems) / 2**20:.0f} MiB |"
            )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (2 cores)")
    print("| shape | processes | start → ready (median, min–max) | RSS sum | PSS sum |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
