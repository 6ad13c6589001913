"""``trtllm-operator`` command line: ``run | plan | render | simulate | crds | tune``.

Each sub-command lives in its own module under :mod:`trtllm_operator.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (a callable taking the parsed
``argparse.Namespace`` and returning the process exit code). Modules keep heavy imports (kopf,
matplotlib) inside their ``func`` so that ``trtllm-operator plan`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from trtllm_operator import __version__

#: Sub-command modules in help order. A module that does not exist yet is left out of the CLI.
COMMANDS: tuple[str, ...] = ("run", "plan", "render", "simulate", "tune", "crds", "cache")


class _CommandParser(argparse.ArgumentParser):
    """A sub-command's parser whose usage errors are the message alone (argparse names the flag and
    the value; the command's ``type`` functions add what to give) and a pointer to ``--help``, exit 2:
    argparse's default prints the whole usage first, 30 lines for ``simulate``, which buried the
    message (fresh-user trial 38 F7)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n({self.prog} --help lists every flag)\n")


def build_parser() -> argparse.ArgumentParser:
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[_CommandParser]]:
    parser = argparse.ArgumentParser(
        prog="trtllm-operator",
        description="Kubernetes operator for TensorRT-LLM engines served by Triton Inference Server.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser)
    for name in COMMANDS:
        module_name = f"trtllm_operator.commands.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).register(sub)
    return parser, sub


def main(argv: Sequence[str] | None = None) -> int:
    parser, sub = _build()
    # parse_known_args, so that an argument the sub-command does not know is refused by the
    # sub-command's parser (its prog, e.g. "trtllm-operator simulate: error: unrecognized arguments:
    # --multi-node", and the pointer to its --help), not by the top parser with its whole usage
    # (fresh-user trial 41 F1; argparse's own parse_args reports the leftovers from the top parser).
    args, extras = parser.parse_known_args(argv)
    if extras:
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extras)}")
    try:
        code: int = args.func(args)
        # Flush inside the try: output still buffered would otherwise meet the closed pipe at
        # interpreter shutdown, outside this handler.
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`trtllm-operator plan … | head`): exit quietly as a Unix tool does,
        # the way Python's documentation recommends (signal module, "Note on SIGPIPE"): point
        # stdout at /dev/null so the flush at shutdown cannot raise again, and exit 1, the code
        # Python itself uses on EPIPE. Not SIGPIPE's SIG_DFL, which that note advises against.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
