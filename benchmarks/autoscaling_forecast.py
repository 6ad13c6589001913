"""The capacity recommendation's upward forecast, reported on the scored halves (issue 19).

The tuning set (``benchmarks/autoscaling.py``) did not choose a forecast; this prints what the
tuned capacity setting (``policies.CAPACITY_*``: target, scale-down window, smoothing) scores with
and without a 60 s forecast on the Azure trace's second half at ×10 and ×20, 60 s cold start —
reporting only: nothing here feeds a choice. Same setup, prior, initial count and oracle as
``autoscaling.py``.

    .venv/bin/python benchmarks/autoscaling_forecast.py
"""

from __future__ import annotations

from dataclasses import replace

import autoscaling as bench

from trtllm_operator.decide import autoscaling as asc
from trtllm_operator.simulate import policies
from trtllm_operator.simulate.traces import read_azure_csv, time_scale


def main() -> None:
    path = bench.SHARED_TRACE if bench.SHARED_TRACE.exists() else bench.BUNDLED_TRACE
    trace = read_azure_csv(path)
    half = trace[-1].arrival_s / 2
    replica = bench.benchmark_replica()
    setup = bench.Setup(replica.spec, 2000.0, 60.0, 0)
    for k in (10.0, 20.0):
        reqs = time_scale(trace, k)
        _, oracle = bench.best_oracle(reqs, setup, half / k)
        initial = policies.starting_replicas(reqs, setup.spec)
        prior = bench.prior_of(reqs, half / k, setup.spec)
        for forecast in (0.0, 60.0):
            params = {
                "_family": "capacity",
                "_target": policies.CAPACITY_TARGET,
                "_smoothing_s": policies.CAPACITY_SMOOTHING_S,
                "_forecast_s": forecast,
                "scale_up": replace(asc.DEFAULT_SCALE_UP, stabilization_window_seconds=0),
                "scale_down": replace(
                    asc.DEFAULT_SCALE_DOWN, stabilization_window_seconds=policies.CAPACITY_DOWN_WINDOW_S
                ),
            }
            s = bench.simulate(reqs, setup, bench.make_policy(params, prior), initial, half / k)
            print(
                f"×{k:g} forecast {forecast:g} s: SLO attainment {s['slo_attainment']:.2%}, "
                f"{s['gpu_hours']:.2f} GPU-h = {s['gpu_hours'] / oracle['gpu_hours']:.2f}× the oracle "
                f"({oracle['gpu_hours']:.2f} GPU-h)"
            )


if __name__ == "__main__":
    main()
