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


def add_replica_arguments(parser: Any) -> None:
    """The flags of one replica's model and engine shape that ``plan`` and ``simulate`` share, each
    with one help text (they were declared twice, with different texts): :func:`add_model_arguments`
    (``--model-config``, ``--gpu``, the formats, ``--tp``, ``--pp``), then ``--max-seq-len``,
    ``--max-batch-size`` and ``--max-num-tokens``, as the LLMEngine fields they stand for (the
    planner's :class:`~engine_builder.planner.PlanRequest` reads them the same way in both commands)."""
    add_model_arguments(parser)
    add_build_arguments(parser)


def add_model_arguments(parser: Any, *, required: bool = True) -> None:
    """``--model-config``, ``--gpu``, :func:`add_format_arguments`, ``--tp`` and ``--pp``: the model
    and the GPUs of one replica, with one help text and one type each for ``plan``, ``simulate`` and
    ``tune --simulate`` (whose two are ``required=False``: its other sources take none)."""
    parser.add_argument(
        "--model-config",
        required=required,
        help="the model's Hugging Face config.json (the file, or the directory that holds it)",
    )
    parser.add_argument(
        "--gpu",
        required=required,
        help="GPU product: its nvidia.com/gpu.product value (e.g. NVIDIA-H200) or an alias (H200, H100) "
        "(spec.gpu.product)",
    )
    add_format_arguments(parser)
    parser.add_argument(
        "--tp",
        type=integer("an integer ≥ 1"),
        default=1,
        help="tensor parallelism: GPUs that split every layer (spec.parallelism.tensor; default 1)",
    )
    parser.add_argument(
        "--pp",
        type=integer("an integer ≥ 1"),
        default=1,
        help="pipeline parallelism: GPUs that split the layers into stages (spec.parallelism.pipeline; "
        "default 1); a replica has tp × pp GPUs",
    )


def add_build_arguments(parser: Any) -> None:
    """``--max-seq-len``, ``--max-batch-size`` and ``--max-num-tokens`` as the engine's
    ``spec.build`` limits (``tune`` has flags of these names with another meaning, the settings now)."""
    parser.add_argument(
        "--max-seq-len",
        type=build_integer("max_seq_len"),
        default=None,
        help="prompt + output tokens of the longest sequence (spec.build.maxSeqLen): TensorRT-LLM rejects "
        "longer prompts (above maxSeqLen - 1; without chunked context above maxNumTokens too) and cuts "
        "outputs at maxSeqLen - prompt (default: the largest of the model's context and the powers of "
        "two below it whose 16 full sequences fit in the KV cache, docs/planner.md; pass the model's "
        "context to plan for it)",
    )
    parser.add_argument(
        "--max-batch-size",
        type=build_integer("max_batch_size"),
        default=None,
        help="sequences scheduled together (spec.build.maxBatchSize; default: the planner's recommendation)",
    )
    parser.add_argument(
        "--max-num-tokens",
        type=build_integer("max_num_tokens"),
        default=None,
        help="tokens per iteration across the batch (spec.build.maxNumTokens; default: the planner's, "
        "TensorRT-LLM's 8192)",
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
