"""Every sub-command's ``--help`` reads as plain text: no reST markup from the module docstrings
(a new user saw ``trtllm-operator plan`` in double backticks and :mod: roles), and every flag of
``plan`` says what it is."""

from __future__ import annotations

import argparse
import re

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
