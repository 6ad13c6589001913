"""Every sub-command's ``--help`` reads as plain text: no reST markup from the module docstrings
(a new user saw ``trtllm-operator plan`` in double backticks and :mod: roles), and every flag of
``plan`` says what it is."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from trtllm_operator.cli import COMMANDS, build_parser, main
from trtllm_operator.commands.simulate import engine_flags


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


#: The flags of one replica's model and engine shape that plan and simulate share.
SHARED_FLAGS = (
    "--model-config",
    "--gpu",
    "--quantization",
    "--kv-cache-dtype",
    "--tp",
    "--pp",
    "--max-seq-len",
    "--max-batch-size",
    "--max-num-tokens",
)


def test_plan_and_simulate_declare_their_shared_flags_once() -> None:
    """Fresh-user trial 41 (left-over, low): plan and simulate declared the same flags twice, with
    different help texts (--model-config "(file or directory)" in one only; --max-seq-len described
    two ways). One home (commands.add_replica_arguments): the same type, default, requirement and
    help text in both."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))

    def shape(command: str, flag: str) -> tuple[object, ...]:
        action = next(a for a in sub.choices[command]._actions if flag in a.option_strings)
        kind = getattr(action.type, "__name__", action.type)
        return (action.option_strings, kind, action.default, action.required, action.help)

    for flag in SHARED_FLAGS:
        planned, simulated = shape("plan", flag), shape("simulate", flag)
        if flag in ENGINE_FILLED:  # simulate leaves them unset; its default is plan's (below)
            assert simulated[2] is None, flag
            planned, simulated = planned[:2] + planned[3:], simulated[:2] + simulated[3:]
        assert planned == simulated, flag


#: simulate's shared flags whose argparse default is None so that a flag left out is told from one
#: given: the LLMEngine of --deployment fills them, else plan's default (commands.simulate.engine_flags;
#: fresh-user trial 44 F12).
ENGINE_FILLED = ("--quantization", "--kv-cache-dtype", "--tp", "--pp")


@pytest.mark.parametrize("command", ["plan", "simulate"])
def test_the_shared_flags_parse_as_before(command: str) -> None:
    """The move keeps each flag's behaviour: the values, the defaults, and the range types."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[command]
    base = ["--model-config", "c.json", "--gpu", "H200"] + (
        ["--trace", "t.csv"] if command == "simulate" else []
    )
    defaults = parser.parse_args(base)
    if command == "simulate":
        assert engine_flags(defaults, None) == []  # no --deployment engine: plan's defaults
    assert (defaults.quantization, defaults.kv_cache_dtype, defaults.tp, defaults.pp) == (
        "none",
        "auto",
        1,
        1,
    )
    assert (defaults.max_seq_len, defaults.max_batch_size, defaults.max_num_tokens) == (None, None, None)
    shape = ["--quantization", "fp8", "--kv-cache-dtype", "fp8", "--tp", "2", "--pp", "3"]
    limits = ["--max-seq-len", "4096", "--max-batch-size", "64", "--max-num-tokens", "2048"]
    given = parser.parse_args([*base, *shape, *limits])
    assert (given.quantization, given.kv_cache_dtype, given.tp, given.pp) == ("fp8", "fp8", 2, 3)
    assert (given.max_seq_len, given.max_batch_size, given.max_num_tokens) == (4096, 64, 2048)
