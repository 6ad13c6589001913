"""Re-fit the iteration-time model on the published calibration points and print the comparison.

Run ``python -m trtllm_operator.simulate.calibrate``; paste the printed ``Efficiency`` into
``perf.DEFAULT_EFFICIENCY`` when the calibration data or the planner changes.
"""

from __future__ import annotations

import statistics

from trtllm_operator.simulate.fleet import calibration_replicas
from trtllm_operator.simulate.perf import (
    BENCH_MAX_BATCH_SIZE,
    IterationModel,
    bench_max_num_tokens,
    fit_efficiency,
    steady_concurrency,
    steady_state_throughput,
)


def main() -> None:
    """Print the fitted constants and one row per calibration point (published vs model)."""
    points = calibration_replicas()
    eff = fit_efficiency(points)
    print(eff)
    errors = []
    print(f"{'model':38} {'gpu':5} tp {'isl':>6} {'osl':>5} {'B':>5} {'published':>9} {'model':>7} error")
    for point, rep in points:
        model = IterationModel.build(rep.costs, rep.rates, rep.quantization, eff)
        predicted = steady_state_throughput(model, point.isl, point.osl, rep.max_kv_tokens)
        b = steady_concurrency(
            point.isl, point.osl, rep.max_kv_tokens, BENCH_MAX_BATCH_SIZE, bench_max_num_tokens(point.isl)
        )
        err = predicted / point.output_tokens_per_s - 1
        errors.append(abs(err))
        print(
            f"{point.model:38} {point.gpu:5} {point.tp:2} {point.isl:6} {point.osl:5} {b:5.0f} "
            f"{point.output_tokens_per_s:9.0f} {predicted:7.0f} {err:+.1%}"
        )
    print(f"median |error| {statistics.median(errors):.1%}, max |error| {max(errors):.1%}")


if __name__ == "__main__":
    main()
