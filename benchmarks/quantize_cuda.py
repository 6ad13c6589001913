"""The builder on a GPU: per-stage wall time of ``engine-builder run`` and calibration ÷ a forward pass.

What it runs is the builder itself. It writes a Llama of a real ``config.json``'s shape (default: the
Llama-3.1-8B-Instruct config under ``--config``) with random bf16 weights, initialised on the GPU, and
the locally trained 512-token tokenizer of :func:`engine_builder.tinymodel.make_tiny_model` (token ids
< 512 of the real 128,256-entry vocabulary). Calibration data: a local text file of ``--samples``
lines, each well over ``--seq`` tokens (no network on the GPU machine, so not cnn_dailymail: the same
number of samples and tokens per sample, batch ``--batch``).

Then, in this order:

1. Warm-up: the builder CLI on a 2-layer model for each format (its first use of ModelOpt's CUDA
   extensions JIT-compiles them; a builder image does that at build time, ``engine_builder.precompile``).
2. The floor: the model loaded as the builder loads it, the calibration batches built as the builder
   builds them (on the GPU), and a plain bf16 forward pass over them, timed three ways: ``plain``
   (``model(input_ids, attention_mask)``, as earlier measurements did), ``calib_kwargs`` (the extra
   arguments calibration passes: ``use_cache=False``, ``logits_to_keep=1``) and ``calib_kwargs_det``
   (the same under the builder's ``torch.use_deterministic_algorithms(True)``).
3. For each format: ``engine-builder run --skip-compile`` in a subprocess, timed from outside (the
   builder's wall) and per stage from its ``state/*.json`` records (quantize: load, calibration,
   save; convert: export).

Results go to ``--out`` as JSON after every step, so a run cut short still reports what it finished.

    PYTHONPATH=engine-builder/src python3 benchmarks/quantize_cuda.py --out $OUT/builder_cuda.json \
        --config meta-llama__Llama-3.1-8B-Instruct.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import transformers
import yaml

from engine_builder.planner.formats import bundled_calibration_texts
from engine_builder.quantize import (
    calibration_batches,
    calibration_tokens,
    forward_kwargs,
    load_model,
    seed_everything,
)
from engine_builder.tinymodel import make_tiny_model


def calibration_file(path: Path, samples: int) -> Path:
    """``samples`` lines, each ~40 bundled sentences (well over 512 tokens of the tiny tokenizer)."""
    sentences = bundled_calibration_texts()
    lines = [" ".join(sentences[(i * 7 + j) % len(sentences)] for j in range(40)) for i in range(samples)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_model(model_dir: Path, config_path: Path, device: str) -> dict[str, Any]:
    """A model of ``config_path``'s shape, random bf16 weights initialised on the GPU, tiny tokenizer."""
    make_tiny_model(model_dir, layers=1, hidden_size=64, intermediate_size=128, heads=2, kv_heads=1)
    for stale in list(model_dir.glob("*.safetensors")) + list(model_dir.glob("*.index.json")):
        stale.unlink()
    config = transformers.AutoConfig.for_model(**json.loads(config_path.read_text()))
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(str(model_dir))
    params = sum(p.numel() for p in model.parameters())
    del model
    torch.cuda.empty_cache()
    return {"params": params, "config": str(config_path.name)}


def forward_floor(model_dir: Path, calib: Path, args: argparse.Namespace) -> dict[str, Any]:
    texts = calib.read_text(encoding="utf-8").splitlines()[: args.samples]
    started = time.monotonic()
    model = load_model(model_dir, args.device)
    load_seconds = time.monotonic() - started
    batches = calibration_batches(model_dir, texts, args.batch, args.seq, args.device)
    out: dict[str, Any] = {
        "load_seconds": round(load_seconds, 3),
        "samples": len(texts),
        "tokens": calibration_tokens(batches),
    }

    def sync() -> None:
        if args.device == "cuda":
            torch.cuda.synchronize()

    def timed(model: Any, batches: list[dict[str, Any]], kwargs: dict[str, Any]) -> float:
        with torch.no_grad():
            model(input_ids=batches[0]["input_ids"], attention_mask=batches[0]["attention_mask"], **kwargs)
            sync()
            started = time.monotonic()
            for b in batches:
                model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], **kwargs)
            sync()
        return round(time.monotonic() - started, 3)

    out["plain"] = timed(model, batches, {})
    out["calib_kwargs"] = timed(model, batches, forward_kwargs(model))
    seed_everything()
    out["calib_kwargs_det"] = timed(model, batches, forward_kwargs(model))
    torch.use_deterministic_algorithms(False)
    del model, batches
    torch.cuda.empty_cache()
    return out


def write_spec(
    path: Path, model_dir: Path, fmt: str, calib: Path, work: Path, samples: int, args: Any
) -> Path:
    spec = {
        "model": {"uri": str(model_dir)},
        "runtime_image": "benchmark",
        "quantization": {
            "format": fmt,
            "kv_cache_dtype": args.kv,
            "calibration": {
                "dataset": str(calib),
                "num_samples": samples,
                "batch_size": args.batch,
                "max_seq_length": args.seq,
            },
        },
        # The engine's target (the plan checks it): NVFP4 engines run on Blackwell only; calibration
        # itself runs here (fake-quant on Hopper).
        "target": {"gpu_product": "NVIDIA-B200", "sm": 100}
        if fmt == "nvfp4"
        else {"gpu_product": "NVIDIA-H200", "sm": 90},
        "output": {
            "artifact_root": str(work / "artifacts"),
            "termination_log": str(work / "termination.json"),
        },
    }
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def run_builder(spec: Path, workdir: Path, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "engine_builder.cli", "run", "--spec", str(spec), "--workdir", str(workdir)]
    started = time.monotonic()
    proc = subprocess.run(
        [*cmd, "--skip-compile"], capture_output=True, text=True, timeout=timeout, check=False
    )
    wall = time.monotonic() - started
    out: dict[str, Any] = {"wall_seconds": round(wall, 3), "exit_code": proc.returncode}
    if proc.returncode != 0:
        out["log_tail"] = (proc.stdout + proc.stderr)[-3000:]
    stages: dict[str, Any] = {}
    for record in sorted((workdir / "state").glob("*.json")):
        rec = json.loads(record.read_text())
        if "stage" not in rec:  # key_inputs.json
            continue
        stages[rec["stage"]] = {"status": rec["status"], "seconds": rec["seconds"]}
        result = rec.get("result") or {}
        if rec["stage"] == "quantize":
            keep = ("load_seconds", "calibration_seconds", "save_seconds", "state", "samples", "tokens")
            stages["quantize"].update({k: result.get(k) for k in (*keep, "calibration_passes")})
        if rec["stage"] == "convert":
            stages["convert"].update(
                {
                    k: result.get(k)
                    for k in ("model_source", "load_seconds", "export_seconds", "quantization", "files")
                }
            )
    out["stages"] = stages
    q, c = stages.get("quantize", {}), stages.get("convert", {})
    if q.get("load_seconds") is not None and c.get("export_seconds") is not None:
        core = q["load_seconds"] + q["calibration_seconds"] + c["load_seconds"] + c["export_seconds"]
        out["load_calibration_export_seconds"] = round(core, 3)
        out["wall_over_core"] = round(wall / core, 3)
    report = workdir / "report.json"
    if report.exists():
        out["report"] = json.loads(report.read_text())
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=Path("/tmp/builder-bench"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--config", type=Path, required=True, help="a Hugging Face config.json")
    p.add_argument("--formats", nargs="+", default=["fp8", "nvfp4", "int4_awq"])
    p.add_argument("--kv", default="fp8")
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--awq-samples", type=int, default=32)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--device", default="cuda", help="cpu: a smoke run of this script on a tiny --config")
    args = p.parse_args()

    assert args.device == "cpu" or torch.cuda.is_available(), "needs a CUDA GPU"
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    import modelopt  # noqa: PLC0415

    results: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "modelopt": modelopt.__version__,
        "command": " ".join(sys.argv),
        "calibration": {"samples": args.samples, "max_seq_length": args.seq, "batch_size": args.batch},
    }

    def save() -> None:
        args.out.write_text(json.dumps(results, indent=2, default=str))

    calib = calibration_file(args.work / "calib.txt", args.samples)
    # 1. warm-ups (JIT of ModelOpt's CUDA extensions), in the background while the big model is written
    tiny = args.work / "tiny"
    make_tiny_model(
        tiny, layers=2, hidden_size=256, intermediate_size=512, heads=4, kv_heads=2, dtype="bfloat16"
    )
    warm: dict[str, tuple[subprocess.Popen[str], float]] = {}
    for fmt in args.formats:
        wdir = args.work / f"warm-{fmt}"
        wdir.mkdir()
        spec = write_spec(wdir / "spec.yaml", tiny, fmt, calib, wdir, 8, args)
        cmd = [
            sys.executable,
            "-m",
            "engine_builder.cli",
            "run",
            "--spec",
            str(spec),
            "--workdir",
            str(wdir / "w"),
        ]
        warm[fmt] = (
            subprocess.Popen(
                [*cmd, "--skip-compile"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ),
            time.monotonic(),
        )
    model_dir = args.work / "model"
    started = time.monotonic()
    results["model"] = {
        **make_model(model_dir, args.config, args.device),
        "make_seconds": round(time.monotonic() - started, 1),
    }
    print("model", results["model"], flush=True)
    results["warmup"] = {}
    for fmt, (proc, t0) in warm.items():
        log, _ = proc.communicate(timeout=args.timeout)
        results["warmup"][fmt] = {
            "exit_code": proc.returncode,
            "seconds_since_start": round(time.monotonic() - t0, 1),
        }
        if proc.returncode != 0:
            results["warmup"][fmt]["log_tail"] = log[-2000:]
    print("warmup", results["warmup"], flush=True)
    save()
    # 2. the floor
    results["forward_floor"] = forward_floor(model_dir, calib, args)
    print("floor", results["forward_floor"], flush=True)
    save()
    # 3. the builder per format
    for fmt in args.formats:
        wdir = args.work / f"run-{fmt}"
        wdir.mkdir()
        samples = args.awq_samples if fmt in ("int4_awq", "w4a8_awq") else args.samples
        spec = write_spec(wdir / "spec.yaml", model_dir, fmt, calib, wdir, samples, args)
        try:
            entry = run_builder(spec, wdir / "w", args.timeout)
        except subprocess.TimeoutExpired as exc:
            entry = {"error": f"timeout after {exc.timeout} s"}
        floor = results["forward_floor"]
        cal = entry.get("stages", {}).get("quantize", {}).get("calibration_seconds")
        if cal is not None and samples == floor["samples"]:
            entry["calibration_over_plain_forward"] = round(cal / floor["plain"], 3)
            entry["calibration_over_calib_kwargs_forward"] = round(cal / floor["calib_kwargs_det"], 3)
        results[fmt] = entry
        print(fmt, json.dumps(entry, default=str)[:3000], flush=True)
        save()
        shutil.rmtree(wdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
