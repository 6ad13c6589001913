"""FP8 + FP8-KV calibration wall time against the calibration batch size (one process, model reloaded).

For each batch size: load the model as the builder does, build the calibration batches on the GPU,
time a forward pass over them with the calibration arguments (``forward_kwargs``), then time
``mtq.quantize`` with the builder's FP8 + FP8-KV config over the same batches. Run on the GPU machine
after ``benchmarks/quantize_cuda.py`` wrote the model and the calibration file:

    python3 benchmarks/calibration_batch_sweep.py /tmp/builder-bench/model /tmp/builder-bench/calib.txt \
        $OUT/calibration_batch_sweep_h200.json 8,32,64

(It ran exactly as this logic, from a scratch copy, for benchmarks/data/calibration_batch_sweep_h200.json.)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

started = time.monotonic()
import modelopt.torch.quantization as mtq  # noqa: E402
import torch  # noqa: E402

from engine_builder.quantize import (  # noqa: E402
    build_quant_config,
    calibration_batches,
    forward_kwargs,
    load_model,
    seed_everything,
)

IMPORT_SECONDS = time.monotonic() - started


def one(model_dir: Path, texts: list[str], batch_size: int) -> dict[str, float]:
    model = load_model(model_dir, "cuda")
    batches = calibration_batches(model_dir, texts, batch_size, 512, "cuda")
    kwargs = forward_kwargs(model)

    def loop(m: Any) -> None:
        with torch.no_grad():
            for b in batches:
                m(input_ids=b["input_ids"], attention_mask=b["attention_mask"], **kwargs)

    torch.cuda.synchronize()
    t = time.monotonic()
    loop(model)
    torch.cuda.synchronize()
    forward = time.monotonic() - t
    config = build_quant_config("fp8", "fp8", None, mtq)
    t = time.monotonic()
    mtq.quantize(model, config, forward_loop=loop)
    torch.cuda.synchronize()
    calibration = time.monotonic() - t
    batches.clear()
    del model
    torch.cuda.empty_cache()
    return {
        "forward_seconds": round(forward, 3),
        "calibration_seconds": round(calibration, 3),
        "ratio": round(calibration / forward, 3),
    }


def main() -> int:
    model_dir, calib, out_path = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    texts = calib.read_text().splitlines()[:512]
    out: dict[str, Any] = {"import_seconds": round(IMPORT_SECONDS, 3)}
    seed_everything()
    for batch_size in (int(x) for x in sys.argv[4].split(",")):
        out[f"batch{batch_size}"] = one(model_dir, texts, batch_size)
        print(batch_size, out[f"batch{batch_size}"], flush=True)
    out_path.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
