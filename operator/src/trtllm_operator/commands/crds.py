"""``trtllm-operator crds``: write the generated CRDs to ``crds/`` and the Helm chart's ``crds/``.

``make crds`` runs it with the repository's paths (the Makefile's ``crds`` target is the one home of
that command line: ``crds/``, the chart's ``crds/`` and ``docs/api.md``). With ``--check`` nothing is
written and the exit code is 1 when a file is missing or stale. ``--api-docs docs/api.md`` also
refreshes the generated field reference inside that file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trtllm_operator.api.crd import all_crds, render_yaml
from trtllm_operator.api.docs import render_reference, splice
from trtllm_operator.commands import say


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "crds",
        help="write the CustomResourceDefinitions generated from the API models",
        description="Write the CustomResourceDefinitions of LLMEngine and LLMDeployment, generated from "
        "the API models, to --output-dir (and every --chart-dir), and with --api-docs the field reference "
        "of docs/api.md. make crds runs it with the repository's paths (see the Makefile's crds target). "
        "With --check nothing is written and the exit code is 1 when a file is missing or stale.",
    )
    parser.add_argument(
        "--output-dir", type=Path, default=Path("crds"), help="directory for the CRDs (default crds)"
    )
    parser.add_argument(
        "--chart-dir",
        type=Path,
        action="append",
        default=[],
        help="another directory that gets the same files (the chart's crds/); repeatable",
    )
    parser.add_argument(
        "--api-docs",
        type=Path,
        default=None,
        help="also refresh the generated field reference in this Markdown file (docs/api.md)",
    )
    parser.add_argument(
        "--check", action="store_true", help="only compare; exit 1 if any file is stale or missing"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rendered = {name: render_yaml(crd) for name, crd in all_crds().items()}
    stale: list[Path] = []
    for flag, directory in [("--output-dir", args.output_dir), *(("--chart-dir", d) for d in args.chart_dir)]:
        for name, text in rendered.items():
            path = directory / name
            try:  # fresh-user trial 44 F15: --output-dir /proc/x was a traceback
                current = path.read_text(encoding="utf-8") if path.exists() else None
                if current == text:
                    continue
                if args.check:
                    stale.append(path)
                    continue
                directory.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            except OSError as exc:
                say(
                    "crds",
                    "error",
                    f"{flag} {directory}: cannot write {path}: {exc.strerror or exc}. Fix: name a "
                    "directory that exists or can be created, and that you can write",
                )
                return 2
            print(f"wrote {path}")
    if args.api_docs is not None:
        try:  # fresh-user trial 41 F8: a missing file or one without the markers was a traceback
            current = args.api_docs.read_text(encoding="utf-8")
            text = splice(current, render_reference())
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            say(
                "crds",
                "error",
                f"--api-docs {args.api_docs}: {why}. Fix: name a Markdown file that holds the generated "
                "reference's markers, as docs/api.md does",
            )
            return 2
        if text != current:
            if args.check:
                stale.append(args.api_docs)
            else:
                try:
                    args.api_docs.write_text(text, encoding="utf-8")
                except OSError as exc:
                    say("crds", "error", f"--api-docs {args.api_docs}: cannot write: {exc.strerror or exc}")
                    return 2
                print(f"wrote {args.api_docs}")
    if stale:
        print(
            "stale CRDs (run `make crds`): " + ", ".join(str(p) for p in stale),
            file=sys.stderr,
        )
        return 1
    return 0
