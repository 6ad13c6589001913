"""The program the benchmark Job runs inside the engine's runtime image (``python3 -c SCRIPT CONFIG``).

It may use only the Python standard library (the runtime image has ``python3`` and
``trtllm-bench``, not this package). For every ISL/OSL pair it writes a synthetic dataset in
trtllm-bench's JSON-lines format — one ``{"task_id", "input_ids", "output_tokens"}`` object per
line (``InferenceRequest`` in ``tensorrt_llm/bench/dataclasses/general.py``; token ids are
arbitrary, no tokenizer needed) — then for every sweep value runs::

    trtllm-bench --model M [--model_path P] throughput|latency --backend B [--engine_dir E]
        [--tp T --pp P [--ep E]] --dataset D --num_requests N --warmup W --concurrency C
        [--max_batch_size S] [--streaming] [--kv_cache_free_gpu_mem_fraction F] --report_json R

(options of ``tensorrt_llm/bench/benchmark/throughput.py`` / ``low_latency.py`` at
000a01de66f0eab4ab05640711f0253f50f5209c; ``latency`` has no ``--max_batch_size`` / ``--streaming``:
it always streams at batch 1; ``--tp/--pp/--ep`` are given for the PyTorch backend only — the
config's ``world`` —, a TensorRT engine carries its own), keeps the report keys of
:data:`trtllm_operator.tuning.report.COMPACT_KEYS` and writes the sweep summary
(:data:`~trtllm_operator.tuning.report.SWEEP_FORMAT`) to the termination message
(``/dev/termination-log``, 4096 bytes at most; floats keep 4 significant digits; percentiles are
dropped first, then results, if it
does not fit) and to stdout. Full reports stay in the pod log. Exit status 0 when at least one run
succeeded, else 1.
"""

from __future__ import annotations

SCRIPT = r"""
import json, os, random, subprocess, sys, tempfile
cfg = json.loads(sys.argv[1])
KEEP = cfg["keep"]
PCT = ("p50", "p90", "p99")
work = tempfile.mkdtemp(prefix="bench-")
results = []
def rnd(v):
    return float("%.4g" % v) if isinstance(v, float) and v == v and abs(v) != float("inf") else v
def compact(rep):
    out = {}
    for sec, keys in KEEP.items():
        src = rep.get(sec)
        if not isinstance(src, dict):
            continue
        kept = {}
        for k in keys:
            if k in src:
                v = src[k]
                if isinstance(v, dict):
                    v = {p: rnd(v[p]) for p in PCT if p in v}
                kept[k] = rnd(v)
        out[sec] = kept
    return out
rng = random.Random(0)
for pair in cfg["pairs"]:
    isl, osl = pair["inputTokens"], pair["outputTokens"]
    data = os.path.join(work, "dataset-%d-%d.jsonl" % (isl, osl))
    with open(data, "w") as fh:
        for i in range(cfg["numRequests"]):
            ids = [rng.randint(100, 30000) for _ in range(isl)]
            fh.write(json.dumps({"task_id": i, "input_ids": ids, "output_tokens": osl}) + "\n")
    for value in cfg["values"]:
        item = {"inputTokens": isl, "outputTokens": osl}
        report = os.path.join(work, "report-%d-%d-%d.json" % (isl, osl, value))
        cmd = ["trtllm-bench", "--model", cfg["model"]]
        if cfg.get("modelPath"):
            cmd += ["--model_path", cfg["modelPath"]]
        cmd += [cfg["mode"], "--backend", cfg["backend"]]
        if cfg.get("engineDir"):
            cmd += ["--engine_dir", cfg["engineDir"]]
        world = cfg.get("world")
        if world:
            cmd += ["--tp", str(world["tp"]), "--pp", str(world["pp"])]
            if world.get("ep"):
                cmd += ["--ep", str(world["ep"])]
        cmd += ["--dataset", data, "--num_requests", str(cfg["numRequests"]), "--warmup", str(cfg["warmup"])]
        if cfg["axis"] == "concurrency":
            cmd += ["--concurrency", str(value)]
            item["concurrency"] = value
        else:
            cmd += ["--max_batch_size", str(value)]
            item["maxBatchSize"] = value
        if cfg["mode"] == "throughput" and cfg.get("streaming"):
            cmd += ["--streaming"]
        if cfg.get("kvFraction"):
            cmd += ["--kv_cache_free_gpu_mem_fraction", str(cfg["kvFraction"])]
        cmd += ["--report_json", report]
        print("+ " + " ".join(c if c != data else "DATASET" for c in cmd), flush=True)
        rc = subprocess.call(cmd)
        if rc != 0 or not os.path.exists(report):
            item["error"] = "trtllm-bench exited with %d" % rc
        else:
            with open(report) as fh:
                full = json.load(fh)
            print(json.dumps(full), flush=True)
            item["report"] = compact(full)
        results.append(item)
doc = {"format": cfg["format"], "results": results}
text = json.dumps(doc, separators=(",", ":"))
if len(text) > 4000:
    for item in results:
        sm = item.get("report", {}).get("streaming_metrics", {})
        for k in ("ttft_percentiles", "tpot_percentiles"):
            sm.pop(k, None)
    text = json.dumps(doc, separators=(",", ":"))
while len(text) > 4000 and results:
    results.pop()
    text = json.dumps(doc, separators=(",", ":"))
print(text, flush=True)
try:
    with open("/dev/termination-log", "w") as fh:
        fh.write(text)
except OSError as exc:
    print("cannot write the termination message: %s" % exc, file=sys.stderr)
sys.exit(0 if any("report" in r for r in results) else 1)
"""
