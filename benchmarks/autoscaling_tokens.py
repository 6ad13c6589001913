"""The capacity recommendation with and without token weighting, on chosen windows (issue 19).

Token weighting (``decide/capacity.py``: a request costs ``prompt + r × output`` tokens, read from the
backend's ``nv_llm_{input,output}_token_len`` histograms, against the prior's lengths) is reported
here, not chosen by ``autoscaling.py``'s tuning: each row runs the capacity policy twice, unweighted
and weighted, with the same setting, prior and initial count as ``autoscaling.py`` (same replica,
SLO, 60 s cold start, routing seed), on one window:

* ``azure-x10`` — the Azure trace ×10, scored on its second half (the main table's row);
* ``tune-azure-x10``, ``tune-bursty-10``, ``tune-bursty-11``, ``tune-long-prompt-10``,
  ``tune-long-prompt-11`` — the tuning set's members (first halves, scored on their second half);
* ``bursty-N``, ``long-prompt-N``, ``long-context-N`` (N = 0, 1, 2) — the synthetic evaluation traces,
  scored on their second half with routing seed N, as ``autoscaling.py`` runs them.

``--profile`` says which traffic the prior (κ, and the weighting's lengths and output token weight,
``policies.profiled_tokens``) is profiled on: ``own`` (the window's requests before its scored part,
as ``autoscaling.py``), ``azure`` (the Azure trace's first half) or ``long-prompt`` (the first half of
the tuning member ``tune-long-prompt-10``) — a profile taken on other traffic than the fleet serves.
``--setting TARGET/WINDOW`` (repeatable; default ``0.8/120``, the tuned one) sets the capacity target
and the scale-down window (s); smoothing 60 s, no forecast, the shipped rates. ``--oracle`` adds the
cheapest oracle's GPU-hours (8 more runs per window). Each simulation takes well under a second.

    .venv/bin/python benchmarks/autoscaling_tokens.py --window tune-long-prompt-10 --window azure-x10 \\
        --profile own --profile azure --setting 0.8/120 --setting 0.9/60 [--oracle]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import autoscaling as bench

from trtllm_operator.decide import autoscaling as asc
from trtllm_operator.simulate import policies
from trtllm_operator.simulate.traces import Request, read_azure_csv, time_scale, window

SYNTHETIC = ("bursty", "long-prompt", "long-context")
WINDOWS = (
    "azure-x10",
    "tune-azure-x10",
    *(f"tune-{name}-{seed}" for name in ("bursty", "long-prompt") for seed in bench.TUNING_SEEDS),
    *(f"{name}-{seed}" for name in SYNTHETIC for seed in (0, 1, 2)),
)
PROFILES = ("own", "azure", "long-prompt")


def windows(trace: list[Request], name: str) -> tuple[list[Request], float, int]:
    """``(requests, scored from, routing seed)`` of a window named as in the module docstring."""
    half = trace[-1].arrival_s / 2
    if name == "azure-x10":
        return time_scale(trace, 10.0), half / 10.0, 0
    if name == "tune-azure-x10":
        reqs = time_scale(window(trace, 0.0, half), 10.0)
        return reqs, reqs[-1].arrival_s / 2, 0
    kind, seed = name.removeprefix("tune-").rsplit("-", 1)
    full = bench.synthetic_traces(trace, int(seed))[kind]
    if name.startswith("tune-"):  # the tuning set's member: its first half, routing seed 0
        reqs = window(full, 0.0, full[-1].arrival_s / 2)
        return reqs, reqs[-1].arrival_s / 2, 0
    return full, full[-1].arrival_s / 2, int(seed)


def profile(trace: list[Request], which: str, reqs: Sequence[Request], score_from: float) -> list[Request]:
    """The requests the prior is profiled on (``--profile``)."""
    if which == "own":
        return [r for r in reqs if r.arrival_s < score_from] or list(reqs)
    if which == "azure":
        return window(trace, 0.0, trace[-1].arrival_s / 2)
    member, start, _ = windows(trace, "tune-long-prompt-10")
    return [r for r in member if r.arrival_s < start]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--window", action="append", choices=WINDOWS, help="repeatable; default: all")
    parser.add_argument("--profile", action="append", choices=PROFILES, help="repeatable; default: own")
    parser.add_argument("--setting", action="append", help="TARGET/WINDOW_S, repeatable; default 0.8/120")
    parser.add_argument("--oracle", action="store_true", help="add the cheapest oracle's GPU-hours")
    args = parser.parse_args(argv)
    settings = []
    for text in args.setting or ["0.8/120"]:
        try:
            target, down = text.split("/")
            settings.append((float(target), int(down)))
        except ValueError:
            parser.error(f"--setting {text!r}: expected TARGET/WINDOW_S, e.g. 0.8/120")
    path = bench.SHARED_TRACE if bench.SHARED_TRACE.exists() else bench.BUNDLED_TRACE
    trace = read_azure_csv(path)
    replica = bench.benchmark_replica()
    base = bench.Setup(replica.spec, 2000.0, 60.0, 0)
    print(
        "| window | profile | target / down window | r | unweighted: attainment, GPU-h, mean replicas "
        "| weighted: attainment, GPU-h, mean replicas |" + (" oracle GPU-h |" if args.oracle else "")
    )
    print("|---|---|---|---|---|---|" + ("---|" if args.oracle else ""))
    for name in args.window or WINDOWS:
        reqs, score_from, seed = windows(trace, name)
        setup = replace(base, seed=seed)
        initial = policies.starting_replicas(reqs, setup.spec)
        oracle = ""
        if args.oracle:
            _, best = bench.best_oracle(reqs, setup, score_from)
            oracle = f" {best['gpu_hours']:.3f} |"
        for which in args.profile or ["own"]:
            seen = profile(trace, which, reqs, score_from)
            prior = policies.profiled_capacity_rps(seen, setup.spec)
            weight, lengths = policies.profiled_tokens(seen, setup.spec)
            for target, down in settings:
                cells = []
                for weighting in ({}, {"output_token_weight": weight, "prior_tokens": lengths}):
                    policy = policies.capacity(
                        1,
                        bench.MAX_REPLICAS,
                        prior,
                        target=target,
                        smoothing_s=policies.CAPACITY_SMOOTHING_S,
                        forecast_s=0.0,
                        scale_up=replace(asc.DEFAULT_SCALE_UP, stabilization_window_seconds=0),
                        scale_down=replace(asc.DEFAULT_SCALE_DOWN, stabilization_window_seconds=down),
                        **weighting,
                    )
                    s: dict[str, Any] = bench.simulate(reqs, setup, policy, initial, score_from)
                    cells.append(f"{s['slo_attainment']:.2%}, {s['gpu_hours']:.3f}, {s['mean_replicas']:.1f}")
                print(
                    f"| {name} | {which} (κ {prior:.2f}/s at {lengths[0]:.0f} / {lengths[1]:.0f} tokens) | "
                    f"{target:g} / {down} s | {weight:.2f} | {cells[0]} | {cells[1]} |{oracle}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
