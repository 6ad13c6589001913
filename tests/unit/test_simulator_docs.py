"""docs/simulator.md's sample run is what the current code prints (issue 25: the sample had gone stale).

The test reads the ``console`` block of the doc, runs the same ``trtllm-operator simulate`` command
in-process (outputs to files go to a temporary directory) and compares the printed JSON with the
JSON in the doc, value by value. When the simulator or the planner changes on purpose, regenerate
the block by running the command and pasting its output.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from trtllm_operator.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "simulator.md"


def _sample() -> tuple[list[str], dict[str, object]]:
    block = re.search(r"```console\n(.*?)```", DOC.read_text(), re.S)
    assert block, "docs/simulator.md has no console block"
    text = block.group(1)
    command, _, output = text.partition("\n{")
    argv = shlex.split(command.removeprefix("$ ").replace("\\\n", " "))
    assert argv[:2] == ["trtllm-operator", "simulate"], argv
    return argv[1:], json.loads("{" + output)


def test_the_documented_sample_is_what_the_code_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, documented = _sample()
    # Paths in the doc are relative to the repository root; output files go to tmp_path.
    monkeypatch.chdir(ROOT)
    for flag in ("--timeline", "--plot"):
        if flag in argv:
            i = argv.index(flag)
            argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == documented
