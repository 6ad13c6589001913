"""The ``trtllm-operator`` sub-commands, one module each.

Exit codes every command shares (a command adds its own outcome codes, e.g. ``plan``'s 3 for
"does not fit", ``render``'s 1 for "cannot be served"): :data:`EXIT_OK` and :data:`EXIT_BAD_INPUT`
(unreadable input, a bad flag or field; the message names it).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from engine_builder.planner import BUILD_LIMITS
from engine_builder.planner.formats import KV_CACHE_DTYPES, QUANT_FORMATS

EXIT_OK = 0
EXIT_BAD_INPUT = 2

#: The program name every message starts with (``cli.build_parser``'s ``prog``).
PROG = "trtllm-operator"


def say(command: str, kind: str, message: str) -> None:
    """Print ``message`` to standard error, each line as ``trtllm-operator COMMAND: KIND: line``:
    the prefix argparse gives a sub-command's usage errors (``trtllm_operator.cli._CommandParser``),
    so every message of ``plan`` and ``simulate`` reads alike (fresh-user trial 40 F9). ``kind``:
    ``error``, ``warning``, ``note``, or a command's own (``plan``'s ``does not fit``)."""
    for line in message.splitlines() or [""]:
        print(f"{PROG} {command}: {kind}: {line}", file=sys.stderr)


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain(doc: str | None) -> str | None:
    """A module docstring as ``--help`` text: reST roles (``:mod:`x```) and literals (````x````)
    become plain ``x`` (a terminal shows no markup)."""
    if doc is None:
        return None
    return _LITERAL.sub(r"\1", _ROLE.sub(r"\1", doc))


def add_format_arguments(parser: Any) -> None:
    """``--quantization`` and ``--kv-cache-dtype``, as ``spec.quantization.format`` and
    ``.kvCacheDtype`` of an LLMEngine (choices from the builder's format table)."""
    parser.add_argument(
        "--quantization",
        default="none",
        help="|".join(QUANT_FORMATS) + " (default none, as spec.quantization.format)",
    )
    parser.add_argument(
        "--kv-cache-dtype", default="auto", help="|".join(KV_CACHE_DTYPES) + " (default auto)"
    )


def integer(hint: str) -> Callable[[str], int]:
    """An argparse ``type`` for a whole-number flag: ``int(text)``, else an
    :class:`argparse.ArgumentTypeError` naming the value and ``hint`` (what to give, e.g. "an
    integer ≥ 1"); argparse prefixes the flag (fresh-user trial 38 F7: "invalid int value: 'nan'" gave
    no range). Ranges are checked after parsing, where the field's own message says why."""

    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            pass
        fix = f"use {hint}"
        try:
            as_float = float(text)
        except ValueError:
            as_float = math.nan
        if math.isfinite(as_float) and as_float.is_integer():
            fix += f", written in decimal digits ({int(as_float)})"
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: not a whole number; {fix}")

    parse.__name__ = "integer"
    return parse


def number(hint: str) -> Callable[[str], float]:
    """An argparse ``type`` for a number flag: ``float(text)``, else an
    :class:`argparse.ArgumentTypeError` naming the value and ``hint`` (argparse prefixes the flag).
    ``nan`` and ``inf`` parse; the command's range check refuses them."""

    def parse(text: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: not a number; use {hint}") from None

    parse.__name__ = "number"
    return parse


def build_integer(name: str) -> Callable[[str], int]:
    """:func:`integer` for a ``spec.build`` limit (``max_seq_len``, ``max_batch_size``, …): the hint
    is its range in the LLMEngine schema (``engine_builder.planner.BUILD_LIMITS``)."""
    field, low, high = BUILD_LIMITS[name]
    return integer(f"an integer from {low} to {high} ({field})")
