"""A sub-command whose reader went away (``trtllm-operator plan … | head -30``) exits quietly: no
``BrokenPipeError`` traceback on stderr (fresh-user trial 42 F1). Handled once, in ``cli.main``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests/fixtures/model-configs/meta-llama__Llama-3.1-70B-Instruct.json"
PLAN = ["plan", "--model-config", str(MODEL), "--quantization", "fp8", "--tp", "2", "--gpu", "NVIDIA-H200"]
RENDER = ["render", "-f", str(ROOT / "examples/llama-3.1-8b-fp8-h100.yaml")]


@pytest.mark.parametrize("argv", [PLAN, RENDER], ids=["plan-json", "render-yaml"])
def test_a_closed_stdout_ends_the_command_quietly(argv: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write, as `| head` is after its lines
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trtllm_operator.cli", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    # render's own notes may go to stderr; a traceback or Python's "Exception ignored … BrokenPipeError"
    # at shutdown may not
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 1  # what Python exits with on EPIPE (signal module, "Note on SIGPIPE")
