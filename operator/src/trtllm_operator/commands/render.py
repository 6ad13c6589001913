"""``trtllm-operator render``: print every child manifest of an LLMDeployment, for GitOps review.

    trtllm-operator render -f deployment.yaml --engine engine.yaml [--gpus-per-node 8] [--lws]

Runs exactly the code the controller runs (:func:`trtllm_operator.render.children.desired_children`)
without a cluster. The engine is taken as written: when it has no ``status.engineKey`` (a manifest
from git), the key is computed from its spec as the LLMEngine controller computes it, and the
artifact location follows ``spec.storage``. Both files may hold several YAML documents; the
LLMEngine named by ``spec.engineRef`` is picked (``--engine`` may be left out when ``-f`` holds it).

Exit codes: 0 rendered; 1 not renderable (incompatible engine, replica needs a LeaderWorkerSet,
bad settings — the reason is printed on stderr, as the condition would say); 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

EXIT_OK = 0
EXIT_NOT_RENDERABLE = 1
EXIT_BAD_INPUT = 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "render",
        help="print the manifests the operator would create for an LLMDeployment",
        description=__doc__.split("\n\n", 1)[0] if __doc__ else None,
    )
    parser.add_argument("-f", "--filename", required=True, help="YAML with the LLMDeployment (may hold more)")
    parser.add_argument("--engine", help="YAML with the LLMEngine (default: look in -f)")
    parser.add_argument("--namespace", default="default", help="namespace when the manifests set none")
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        default=8,
        help="nvidia.com/gpu capacity of one node of the engine's GPU product (default 8)",
    )
    parser.add_argument("--lws", action="store_true", help="assume the LeaderWorkerSet CRD is installed")
    parser.set_defaults(func=run)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (config.pbtxt, launch.sh) as literal blocks, readable in a review."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _docs(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(Path(path).read_text()) if isinstance(d, dict)]


def run(args: argparse.Namespace) -> int:
    # Heavier imports (planner, pydantic models, templates) only when the command runs.
    from trtllm_operator.decide.engine import InvalidEngine, prepare_engine  # noqa: PLC0415
    from trtllm_operator.render.children import desired_children  # noqa: PLC0415

    try:
        docs = _docs(args.filename) + (_docs(args.engine) if args.engine else [])
    except (OSError, yaml.YAMLError) as exc:
        print(f"error: cannot read input: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    deployments = [d for d in docs if d.get("kind") == "LLMDeployment"]
    if not deployments:
        print(f"error: no LLMDeployment in {args.filename}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out: list[dict[str, Any]] = []
    for dep in deployments:
        dep.setdefault("metadata", {}).setdefault("namespace", args.namespace)
        dep["metadata"].setdefault("uid", "")
        ref = ((dep.get("spec") or {}).get("engineRef") or {}).get("name")
        engine = next(
            (
                d
                for d in docs
                if d.get("kind") == "LLMEngine" and (d.get("metadata") or {}).get("name") == ref
            ),
            None,
        )
        if engine is None:
            print(
                f"error: LLMEngine {ref!r} (spec.engineRef.name) not found; pass it with --engine",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        engine["metadata"].setdefault("namespace", dep["metadata"]["namespace"])
        status = engine.setdefault("status", {})
        if not status.get("engineKey"):
            prepared = prepare_engine(engine["metadata"]["name"], engine.get("spec") or {})
            if isinstance(prepared, InvalidEngine):
                print(f"error: LLMEngine {ref}: {prepared.text}", file=sys.stderr)
                return EXIT_BAD_INPUT
            status["engineKey"] = prepared.key
            status.setdefault("artifact", {"uri": prepared.storage.artifact_uri(prepared.key)})
        children = desired_children(dep, engine, gpus_per_node=args.gpus_per_node, lws_installed=args.lws)
        name = dep["metadata"]["name"]
        if children.incompatibilities:
            for problem in children.incompatibilities:
                print(f"{name}: EngineIncompatible: {problem.message()}", file=sys.stderr)
            return EXIT_NOT_RENDERABLE
        if children.blocked:
            print(f"{name}: {children.blocked[0]}: {children.blocked[1]}", file=sys.stderr)
            return EXIT_NOT_RENDERABLE
        out.extend(children.manifests())
    sys.stdout.write(yaml.dump_all(out, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110))
    return EXIT_OK
