"""The ``trtllm-operator`` sub-commands, one module each.

Exit codes every command shares (a command adds its own outcome codes, e.g. ``plan``'s 3 for
"does not fit", ``render``'s 1 for "cannot be served"): :data:`EXIT_OK` and :data:`EXIT_BAD_INPUT`
(unreadable input, a bad flag or field; the message names it).
"""

from __future__ import annotations

import re
from typing import Any

from engine_builder.planner.formats import KV_CACHE_DTYPES, QUANT_FORMATS

EXIT_OK = 0
EXIT_BAD_INPUT = 2

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
