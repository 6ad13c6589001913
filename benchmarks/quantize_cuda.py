"""Calibration speed of the builder's ``quantize`` stage on a GPU (fp8, nvfp4, …).

What it runs is the builder's own code: :func:`engine_builder.tinymodel.make_tiny_model` writes a
random-initialised Llama of the requested shape (default ≈ 1.0 B parameters: 16 layers, hidden 2048,
intermediate 8192, 32 heads, 8 KV heads, bf16; vocab = the locally trained 512-token tokenizer), then
for each format :func:`engine_builder.quantize.quantize` (ModelOpt calibration, the same call a
builder Job makes) and :func:`engine_builder.convert.convert` (TensorRT-LLM checkpoint export). A
plain forward pass over the same calibration batches is timed as the floor.

Each format is calibrated twice: a short warm-up (``--warmup-samples``; the first use of ModelOpt's
CUDA extensions may JIT-compile them) and the measured run. Results go to ``--out`` as JSON.

    PYTHONPATH=engine-builder/src python benchmarks/quantize_cuda.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import modelopt
import torch
import transformers

from engine_builder.convert import convert
from engine_builder.quantize import calibration_batches, load_calibration_texts, load_model, quantize
from engine_builder.spec import BuildSpec
from engine_builder.tinymodel import make_tiny_model


def calibration_file(path: Path, samples: int) -> Path:
    """``samples`` lines, each ~40 bundled sentences (well over 512 tokens of the tiny tokenizer)."""
    text = resources.files("engine_builder").joinpath("data", "calibration.txt").read_text("utf-8")
    sentences = [s for s in text.splitlines() if s.strip() and not s.startswith("#")]
    lines = []
    for i in range(samples):
        lines.append(" ".join(sentences[(i * 7 + j) % len(sentences)] for j in range(40)))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def spec_for(fmt: str, calib: Path, args: argparse.Namespace, samples: int) -> BuildSpec:
    return BuildSpec.model_validate(
        {
            "model": {"uri": "/bench/model"},
            "runtime_image": "benchmark",
            "quantization": {
                "format": fmt,
                "calibration": {
                    "dataset": str(calib),
                    "num_samples": samples,
                    "batch_size": args.batch,
                    "max_seq_length": args.seq,
                },
            },
            "target": {"gpu_product": "NVIDIA-H200", "sm": 90},
        }
    )


def forward_floor(model_dir: Path, calib: Path, args: argparse.Namespace) -> dict[str, float]:
    spec = spec_for("fp8", calib, args, args.samples)
    texts = load_calibration_texts(spec.quantization.calibration, args.samples)
    batches = calibration_batches(model_dir, texts, args.batch, args.seq)
    model = load_model(model_dir, "cuda")
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    with torch.no_grad():
        model(input_ids=batches[0]["input_ids"].cuda())  # warm-up
        torch.cuda.synchronize()
        started = time.monotonic()
        for b in batches:
            model(input_ids=b["input_ids"].cuda(), attention_mask=b["attention_mask"].cuda())
        torch.cuda.synchronize()
    seconds = time.monotonic() - started
    del model
    torch.cuda.empty_cache()
    return {"seconds": round(seconds, 3), "tokens": tokens, "samples": len(texts)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=Path("/tmp/quantize-bench"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--formats", nargs="+", default=["fp8", "nvfp4"])
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--warmup-samples", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--no-convert", action="store_true")
    args = p.parse_args()

    assert torch.cuda.is_available(), "needs a CUDA GPU"
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "modelopt": modelopt.__version__,
        "command": " ".join(sys.argv),
        "calibration": {"samples": args.samples, "max_seq_length": args.seq, "batch_size": args.batch},
    }
    model_dir = args.work / "model"
    started = time.monotonic()
    info = make_tiny_model(
        model_dir,
        layers=args.layers,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        heads=args.heads,
        kv_heads=args.kv_heads,
        dtype="bfloat16",
    )
    results["model"] = {**info, "make_seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(results["model"]), flush=True)
    calib = calibration_file(args.work / "calib.txt", args.samples)
    results["forward_floor"] = forward_floor(model_dir, calib, args)
    print("floor", results["forward_floor"], flush=True)

    def progress(done: float, total: float | None, unit: str, msg: str) -> None:
        return None

    for fmt in args.formats:
        entry: dict[str, Any] = {}
        try:
            warm = quantize(
                spec_for(fmt, calib, args, args.warmup_samples), model_dir, args.work / "warm", progress
            )
            entry["warmup"] = {k: warm[k] for k in ("samples", "calibration_seconds", "seconds_per_sample")}
            out = args.work / f"q-{fmt}"
            shutil.rmtree(out, ignore_errors=True)
            spec = spec_for(fmt, calib, args, args.samples)
            summary = quantize(spec, model_dir, out, progress)
            entry["measured"] = summary
            if not args.no_convert:
                started = time.monotonic()
                ck = convert(
                    spec, model_dir, out / "modelopt_state.pth", args.work / f"ckpt-{fmt}", "bfloat16"
                )
                entry["convert"] = {
                    "seconds": round(time.monotonic() - started, 1),
                    "quantization": ck.get("quantization"),
                    "files": ck.get("files"),
                }
        except Exception as exc:  # record and continue with the next format
            entry["error"] = f"{type(exc).__name__}: {exc}"
        results[fmt] = entry
        print(fmt, json.dumps(entry, default=str), flush=True)
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
