"""``trtllm-operator <command> --help``: plain text for a terminal (no reStructuredText markup), and
every option explained."""

from __future__ import annotations

import re

import pytest

from trtllm_operator.cli import main

RST = re.compile(r"``|:(?:mod|func|class|data|meth|attr):`")


def help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "cache", "crds", "cache import"])
def test_help_is_plain_text_with_a_description(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(command.split(), capsys)
    assert not RST.search(text), RST.search(text)
    usage, _, rest = text.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert usage.startswith("usage: trtllm-operator")
    assert not description.startswith(("options:", "positional arguments:")), f"{command}: no description"


def test_every_run_option_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    options = help_text(["run"], capsys).split("options:", 1)[1]
    entries = re.split(r"\n(?=  -)", options.strip("\n"))
    assert any(e.lstrip().startswith("--standalone") for e in entries)
    for entry in entries:
        # "--flag METAVAR   help text…" (help may wrap); the help must be there
        words = re.sub(r"^\s*(?:-[\w-]+(?: [A-Z{][^\s,]*)?(?:, )?)+", "", entry).split()
        assert len(words) >= 2, f"no help text: {entry.strip()!r}"
