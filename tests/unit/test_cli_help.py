"""Every sub-command's ``--help`` reads as plain text: no reST markup from the module docstrings
(a new user saw ``trtllm-operator plan`` in double backticks and :mod: roles), and every flag of
``plan`` says what it is."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from trtllm_operator.cli import COMMANDS, build_parser, main


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_no_rest_markup(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out and not re.search(r":[a-z]+:`", out), out


def test_every_plan_flag_has_help() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    plan = sub.choices["plan"]
    bare = [a.option_strings for a in plan._actions if a.option_strings and not a.help]
    assert bare == [], bare


@pytest.mark.parametrize(
    ("argv", "prog"),
    [
        (["plan", "--model-config", "x.json", "--gpu", "H200", "--bogus"], "trtllm-operator plan"),
        (
            ["simulate", "--trace", "t.csv", "--model-config", "x.json", "--gpu", "H200", "--multi-node"],
            "trtllm-operator simulate",
        ),
    ],
)
def test_an_unknown_flag_is_refused_by_the_sub_commands_parser(
    argv: list[str], prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 41 F1: an unknown flag was reported by the top parser ("usage: trtllm-operator
    [-h] …" then "trtllm-operator: error: unrecognized arguments"), without the sub-command's prefix
    and its --help pointer (argparse's parse_args reports leftovers from the top parser)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}: error: unrecognized arguments: {argv[-1]}\n"), err
    assert f"({prog} --help lists every flag)" in err and "usage:" not in err


@pytest.mark.parametrize("content", [None, "no markers here\n"])
def test_crds_api_docs_that_cannot_be_spliced_is_an_error_not_a_traceback(
    content: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 41 F8: ``crds --api-docs <missing file>`` (or a file without the generated
    reference's markers) ended in a traceback."""
    docs = tmp_path / "api.md"
    if content is not None:
        docs.write_text(content, encoding="utf-8")
    code = main(["crds", "--output-dir", str(tmp_path / "crds"), "--api-docs", str(docs)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"trtllm-operator crds: error: --api-docs {docs}: "), err
    assert "Fix: name a Markdown file that holds the generated reference's markers" in err
