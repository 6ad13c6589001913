"""What foresight is worth: the clairvoyant oracle against the causal reference (issue 19).

Issue 19's goal compares every reactive policy with the *clairvoyant* oracle (``policies.OraclePolicy``:
it creates each replica a cold start before the work it is for arrives). A reactive policy cannot know
that work; this benchmark measures, on the windows ``autoscaling.py`` scores, how much of the gap to
the oracle is the missing foresight and how much is the policy:

* ``oracle`` — the cheapest clairvoyant plan that meets the SLO target (``autoscaling.best_oracle``);
* ``causal`` — the cheapest plan of the same sizing rule fed only the work that has already arrived,
  measured perfectly and at once (``OraclePolicy(foresight=False)``, its utilization searched in
  hindsight the same way: perfect measurement plus the best constant headroom for this window);
* ``capacity`` — the capacity recommendation with the tuned setting (target 0.8, scale-down window
  120 s, smoothing 60 s, no forecast, the shipped rates; prior profiled on the window's requests before
  its scored part, as ``autoscaling.py``), and ``builtin`` (the shipped utilization targets).

Every run uses ``autoscaling.py``'s replica, SLO (TTFT ≤ 2 s for 99 % of the scored requests), 60 s
cold start, starting count and routing seed; each window is scored on its second half. Windows:
``azure-x10`` and ``azure-x20`` (the Azure conversation trace compressed ×10 / ×20) and the synthetic
evaluation traces (``bursty-N``, ``long-prompt-N``, ``long-context-N``, N = 0, 1, 2).

    .venv/bin/python benchmarks/autoscaling_causal.py [--window azure-x20 ...] [--write]

``--write`` replaces the ``autoscaling-causal`` section of benchmarks/RESULTS.md with the table. One
window takes about 20 simulations (two bisections of 8, two policies).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import autoscaling as bench
import autoscaling_tokens as tokens

from trtllm_operator.decide import autoscaling as asc
from trtllm_operator.simulate import policies
from trtllm_operator.simulate.traces import Request, read_azure_csv, time_scale

WINDOWS = ("azure-x10", "azure-x20", *(f"{n}-{s}" for n in tokens.SYNTHETIC for s in (0, 1, 2)))
BEGIN, END = "<!-- autoscaling-causal:begin -->", "<!-- autoscaling-causal:end -->"


def windows(trace: list[Request], name: str) -> tuple[list[Request], float, int]:
    """``(requests, scored from, routing seed)``: ``azure-x20`` here, the others as autoscaling_tokens."""
    if name == "azure-x20":
        return time_scale(trace, 20.0), trace[-1].arrival_s / 2 / 20.0, 0
    return tokens.windows(trace, name)


def cell(s: dict[str, Any], oracle_gpu_h: float) -> str:
    return f"{s['slo_attainment']:.2%} / {s['gpu_hours']:.3f} ({s['gpu_hours'] / oracle_gpu_h:.2f}×)"


def row(trace: list[Request], base: bench.Setup, name: str) -> str:
    """One window's table row (see the module docstring)."""
    reqs, score_from, seed = windows(trace, name)
    setup = replace(base, seed=seed)
    _, oracle = bench.best_oracle(reqs, setup, score_from)
    u_causal, causal = bench.best_oracle(reqs, setup, score_from, foresight=False)
    initial = policies.starting_replicas(reqs, setup.spec)
    prior = bench.prior_of(reqs, score_from, setup.spec)
    capacity = policies.capacity(
        1,
        bench.MAX_REPLICAS,
        prior,
        target=0.8,
        smoothing_s=policies.CAPACITY_SMOOTHING_S,
        forecast_s=0.0,
        scale_up=replace(asc.DEFAULT_SCALE_UP, stabilization_window_seconds=0),
        scale_down=replace(asc.DEFAULT_SCALE_DOWN, stabilization_window_seconds=120),
    )
    cap = bench.simulate(reqs, setup, capacity, initial, score_from)
    builtin = bench.simulate(reqs, setup, policies.builtin(1, bench.MAX_REPLICAS), initial, score_from)
    o = oracle["gpu_hours"]
    met = causal["slo_attainment"] >= bench.SLO_TARGET
    headroom = f"{1 / u_causal:.2f}×" if met else "none meets the target (0.1 tried)"
    return (
        f"| {name} | {oracle['slo_attainment']:.2%} / {o:.3f} | {cell(causal, o)} | {headroom} "
        f"| {cell(cap, o)} | {cap['gpu_hours'] / causal['gpu_hours']:.2f}× | {cell(builtin, o)} |"
    )


HEADER = (
    "| window | oracle: attainment / GPU-h | causal: attainment / GPU-h (× oracle) | causal's headroom "
    "| capacity-tuned (× oracle) | capacity-tuned ÷ causal GPU-h | builtin (× oracle) |\n"
    "|---|---|---|---|---|---|---|"
)


def write_results(section: str) -> None:
    text = bench.RESULTS.read_text()
    if BEGIN not in text:
        raise SystemExit(f"{bench.RESULTS} has no {BEGIN} … {END} section to replace")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    bench.RESULTS.write_text(f"{head}{BEGIN}\n{section}\n{END}{tail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--window", action="append", choices=WINDOWS, help="repeatable; default: all")
    parser.add_argument("--write", action="store_true", help="replace the section in RESULTS.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    trace = read_azure_csv(bench.SHARED_TRACE if bench.SHARED_TRACE.exists() else bench.BUNDLED_TRACE)
    base = bench.Setup(bench.benchmark_replica().spec, 2000.0, 60.0, 0)
    lines = [HEADER]
    print(HEADER, flush=True)
    for name in args.window or WINDOWS:
        lines.append(row(trace, base, name))
        print(lines[-1], flush=True)
    took = time.monotonic() - started
    print(f"{len(lines) - 1} windows in {took:.0f} s", file=sys.stderr)
    if args.write:
        command = "`.venv/bin/python benchmarks/autoscaling_causal.py --write`"
        write_results(f"Produced by {command} ({took:.0f} s on this machine).\n\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
