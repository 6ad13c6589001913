"""``trtllm-operator tune``: the operator's tuning recommendations, offline.

Three sources, one output (the same code the operator runs, :mod:`trtllm_operator.tuning.report`
and :mod:`trtllm_operator.decide.tuning`):

* ``--bench-report FILE …`` — ``trtllm-bench --report_json`` files, or the benchmark Job's sweep
  summary (``kubectl get pod … -o jsonpath='{.status.containerStatuses[0].state.terminated.message}'``).
  A bare report carries no ``--concurrency``; write ``FILE@N`` to give it (else the runtime
  ``world_info.max_batch_size`` is the sweep axis).
* ``--simulate`` — the simulator's replica model (iteration time fitted to NVIDIA's published
  throughput; :mod:`trtllm_operator.simulate.perf`) swept over ``--values`` sequences in flight for
  ``--isl``/``--osl``: what a benchmark would show, before buying GPU time.
* ``--kv-history FILE`` — the advisor on a KV-cache history: a JSON list of ``[unixSeconds,
  kvCacheUtilization, waitingPerReplica, readyReplicas]`` rows (``status.tuning.history``), with
  the current settings from ``--kv-fraction``, ``--replicas``, ``--max-batch-size``,
  ``--max-num-tokens``.

Output: per workload the curve, the knee and the recommended ``maxBatchSize`` (knee × 1.25); the
advisor's recommendations with their evidence; ``--output json`` for machines. Exit codes: 0 done,
2 bad input (the message names the file, key or flag).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trtllm_operator.commands import EXIT_BAD_INPUT, EXIT_OK, add_model_arguments, plain, say


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tune",
        help="knee and maxBatchSize from trtllm-bench reports or the simulator; the KV-cache advisor offline",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--bench-report", nargs="+", metavar="FILE[@CONCURRENCY]", help="trtllm-bench report(s)")
    src.add_argument("--simulate", action="store_true", help="sweep the simulator's replica model")
    src.add_argument("--kv-history", metavar="FILE", help="advisor on a KV-cache history (JSON rows)")
    p.add_argument("--axis", choices=("concurrency", "maxBatchSize"), default=None, help="sweep axis")
    p.add_argument("--gain-fraction", type=float, default=None, help="knee: later gain below this (0.10)")
    sim = p.add_argument_group("--simulate")
    add_model_arguments(sim, required=False)  # as plan and simulate take them (one home)
    sim.add_argument("--isl", type=int, default=128, help="prompt tokens (default 128)")
    sim.add_argument("--osl", type=int, default=128, help="output tokens (default 128)")
    sim.add_argument(
        "--values", default="1,8,32,64,128,256,512,1024", help="sequences in flight to sweep (comma list)"
    )
    adv = p.add_argument_group("--kv-history")
    adv.add_argument("--kv-fraction", type=float, default=0.9, help="kvCacheFreeGpuMemFraction now")
    adv.add_argument("--replicas", type=int, default=1, help="replicas now")
    adv.add_argument("--max-batch-size", type=int, default=None, help="engine maxBatchSize now")
    adv.add_argument("--max-num-tokens", type=int, default=None, help="engine maxNumTokens now")
    adv.add_argument("--window-seconds", type=float, default=1800.0, help="advisor window (default 1800)")
    adv.add_argument("--now", type=float, default=None, help="evaluate at this Unix time (default: last row)")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(func=run)


def _bad(message: str) -> int:
    """``message`` as an error of this command (:func:`~trtllm_operator.commands.say`, the one home of
    "trtllm-operator COMMAND: error: …"; this printed "trtllm-operator tune: …", without the kind)."""
    say("tune", "error", message)
    return EXIT_BAD_INPUT


def _load_reports(specs: list[str]) -> list[Any]:
    from dataclasses import replace  # noqa: PLC0415

    from trtllm_operator.tuning.report import load_results  # noqa: PLC0415

    out = []
    for spec in specs:
        path, _, conc = spec.partition("@")
        results = load_results(path)
        if conc:
            if not conc.isdigit() or int(conc) < 1:
                raise ValueError(f"{spec}: the part after @ must be a positive concurrency, got {conc!r}")
            results = [replace(r, concurrency=int(conc)) for r in results]
        out.extend(results)
    return out


def _simulated(args: argparse.Namespace) -> list[Any]:
    from engine_builder.planner import load_hf_config  # noqa: PLC0415
    from trtllm_operator.simulate.fleet import replica_setup  # noqa: PLC0415
    from trtllm_operator.simulate.perf import (  # noqa: PLC0415
        steady_concurrency,
        steady_state_terms,
        steady_state_throughput,
    )
    from trtllm_operator.tuning.report import BenchResult, Latency  # noqa: PLC0415

    if not args.model_config or not args.gpu:
        raise ValueError("--simulate needs --model-config and --gpu")
    try:
        values = sorted({int(v) for v in args.values.split(",") if v.strip()})
    except ValueError as exc:
        raise ValueError(f"--values must be a comma list of integers, got {args.values!r}") from exc
    if not values or values[0] < 1:
        raise ValueError("--values must be positive integers")
    if args.isl < 1 or args.osl < 1:
        raise ValueError("--isl and --osl must be >= 1")
    setup = replica_setup(
        load_hf_config(args.model_config),
        args.gpu,
        quantization=args.quantization,
        kv_cache_dtype=args.kv_cache_dtype,
        tp=args.tp,
        pp=args.pp,
        max_batch_size=max(values),
        max_num_tokens=max(8192, args.isl + 1024),
    )
    model, kv = setup.spec.model, setup.spec.max_kv_tokens
    out = []
    for v in values:
        tput = steady_state_throughput(
            model, args.isl, args.osl, kv, max_batch_size=v, max_num_tokens=max(8192, args.isl + 1024)
        )
        b = steady_concurrency(args.isl, args.osl, kv, v, max(8192, args.isl + 1024))
        tokens, kv_tokens = steady_state_terms(args.isl, args.osl, b)
        it_ms = model.iteration_s(round(tokens), round(kv_tokens)) * 1000
        lat = Latency(it_ms, None, it_ms)
        out.append(
            BenchResult(
                input_tokens=args.isl,
                output_tokens=args.osl,
                concurrency=v,
                max_batch_size=v,
                max_num_tokens=None,
                output_tokens_per_s=tput,
                requests_per_s=tput / args.osl,
                output_tokens_per_s_per_gpu=tput / setup.spec.gpus,
                avg_request_latency_ms=it_ms * args.osl,
                ttft_ms=lat,
                tpot_ms=lat,
                num_requests=0,
            )
        )
    return out


def _curves_doc(results: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    from trtllm_operator.decide.tuning import KNEE_GAIN_FRACTION  # noqa: PLC0415
    from trtllm_operator.tuning.report import overall_recommendation, summarize  # noqa: PLC0415

    gain = KNEE_GAIN_FRACTION if args.gain_fraction is None else args.gain_fraction
    curves = summarize(results, args.axis, gain_fraction=gain)
    return {
        "runs": [
            {
                "inputTokens": r.input_tokens,
                "outputTokens": r.output_tokens,
                "concurrency": r.concurrency,
                "maxBatchSize": r.max_batch_size,
                "outputTokensPerSecond": round(r.output_tokens_per_s, 1),
                "tpotMsP50": None if r.tpot_ms is None else round(r.tpot_ms.p50, 3),
                "error": r.error,
            }
            for r in results
        ],
        "curves": [
            {
                "inputTokens": c.input_tokens,
                "outputTokens": c.output_tokens,
                "axis": c.axis,
                "knee": c.knee.x if c.knee else None,
                "recommendedMaxBatchSize": c.recommended_max_batch_size,
                "message": c.message,
            }
            for c in curves
        ],
        "recommendedMaxBatchSize": overall_recommendation(curves),
    }


def _advice_doc(args: argparse.Namespace) -> dict[str, Any]:
    from trtllm_operator.decide.tuning import (  # noqa: PLC0415
        AdvisorConfig,
        CurrentSettings,
        Sample,
        advise,
        recommendation_to_status,
    )

    try:
        rows = json.loads(Path(args.kv_history).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{args.kv_history}: cannot read a JSON history: {exc}") from exc
    if not isinstance(rows, list) or not rows:
        raise ValueError(
            f"{args.kv_history}: expected a non-empty JSON list of [t, kv, queue, replicas] rows"
        )
    samples = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) < 2 or not all(isinstance(x, int | float) for x in row):
            raise ValueError(
                f"{args.kv_history}: row {i} must be [unixSeconds, kv, queue?, replicas?] numbers"
            )
        t, kv = float(row[0]), float(row[1])
        q = float(row[2]) if len(row) > 2 and row[2] >= 0 else None
        r = int(row[3]) if len(row) > 3 and row[3] >= 0 else None
        samples.append(Sample(t, kv if kv >= 0 else None, q, r))
    now = args.now if args.now is not None else max(s.time for s in samples)
    cfg = AdvisorConfig(window_seconds=args.window_seconds)
    current = CurrentSettings(
        kv_cache_free_gpu_mem_fraction=args.kv_fraction,
        replicas=args.replicas,
        max_batch_size=args.max_batch_size,
        max_num_tokens=args.max_num_tokens,
    )
    recs = advise(samples, current, now=now, config=cfg)
    return {"recommendations": [recommendation_to_status(r) for r in recs]}


def _print_table(doc: dict[str, Any]) -> None:
    if "runs" in doc:
        print(f"{'ISL':>6} {'OSL':>6} {'conc':>6} {'maxBS':>6} {'out tok/s':>11} {'TPOT ms':>8}  error")
        for r in doc["runs"]:
            tpot = "" if r["tpotMsP50"] is None else f"{r['tpotMsP50']:.2f}"
            print(
                f"{r['inputTokens']:>6} {r['outputTokens']:>6} {r['concurrency'] or '-':>6} "
                f"{r['maxBatchSize'] or '-':>6} {r['outputTokensPerSecond']:>11.1f} {tpot:>8}  "
                f"{r['error'] or ''}"
            )
        print()
        for c in doc["curves"]:
            print(f"ISL/OSL {c['inputTokens']}/{c['outputTokens']}: {c['message']}")
        rec = doc["recommendedMaxBatchSize"]
        print(f"\nrecommended maxBatchSize: {rec if rec else 'none (no knee in the sweep)'}")
    if "recommendations" in doc:
        if not doc["recommendations"]:
            print("no recommendation: utilization within the thresholds, or too few samples in the window")
        for r in doc["recommendations"]:
            ev = r["evidence"]
            print(f"{r['type']}: {r['message']}")
            for c in r["changes"]:
                print(f"  {c['field']}: {c['current']} -> {c['recommended']}")
            print(
                f"  evidence: {ev['samples']} samples over {ev['windowSeconds']:.0f} s, KV p10/p50/p90 "
                f"{ev['kvCacheUtilizationP10']:.2f}/{ev['kvCacheUtilizationP50']:.2f}/{ev['kvCacheUtilizationP90']:.2f}"
            )


def run(args: argparse.Namespace) -> int:
    from trtllm_operator.tuning.report import ReportError  # noqa: PLC0415

    try:
        if args.kv_history:
            doc = _advice_doc(args)
        else:
            results = _load_reports(args.bench_report) if args.bench_report else _simulated(args)
            doc = _curves_doc(results, args)
    except (ReportError, ValueError) as exc:
        return _bad(str(exc))
    except Exception as exc:  # planner input errors (unknown GPU, bad config.json) name the field
        if type(exc).__name__ == "PlanInputError":
            return _bad(str(exc))
        raise
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        _print_table(doc)
    return EXIT_OK
