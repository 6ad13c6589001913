"""Operator memory before it handles any object: resident memory after importing what
``trtllm-operator run`` imports, for one or more source trees side by side (issue #20).

Each tree is measured in fresh interpreters (this venv's Python, the tree's ``operator/src`` and
``engine-builder/src`` first on ``PYTHONPATH``), step by step as ``run_operator`` imports: kopf, the
``run`` command, every handler module (which imports ``trtllm_operator.kube.client``), the metrics
exporter's modules. After each step: ``VmRSS`` from /proc/self/status and how many
``kubernetes.client.api.*`` (typed API classes) and ``kubernetes.client.models.*`` modules are
loaded. The median of ``--repeat`` runs per tree.

    git worktree add --detach /tmp/main main
    .venv/bin/python benchmarks/import_rss.py --tree /tmp/main --tree .
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

STEPS = (
    ("interpreter", ""),
    ("kopf", "import kopf"),
    ("trtllm_operator.commands.run", "import trtllm_operator.cli, trtllm_operator.commands.run"),
    ("trtllm_operator.handlers", "import trtllm_operator.handlers"),
    (
        "metrics exporter",
        "import trtllm_operator.kube.metrics_auth, trtllm_operator.kube.metrics_tls, "
        "trtllm_operator.metrics.operator_metrics",
    ),
)

PROBE = """
import json, sys
def rss_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
def count(prefix):
    return sum(1 for m in sys.modules if m.startswith(prefix))
out = []
for name, code in json.loads(sys.argv[1]):
    exec(code)
    out.append([name, rss_kib(), count("kubernetes.client.api."), count("kubernetes.client.models.")])
print(json.dumps(out))
"""


def measure(tree: Path) -> list[list[object]]:
    """One fresh interpreter: ``[step, VmRSS KiB, typed API modules, model modules]`` per step."""
    paths = [str(tree / "operator" / "src"), str(tree / "engine-builder" / "src")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(STEPS)], env=env, capture_output=True, text=True, check=True
    )
    result: list[list[object]] = json.loads(out.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, help="source tree (repeatable); default .")
    parser.add_argument("--repeat", type=int, default=3, help="fresh interpreters per tree")
    args = parser.parse_args()
    trees: list[Path] = [t.resolve() for t in (args.tree or [Path(".")])]
    runs = {tree: [measure(tree) for _ in range(args.repeat)] for tree in trees}
    head = " | ".join(f"`{t}` RSS MiB (API / model modules)" for t in trees)
    print(f"| after importing | {head} |")
    print("|---|" + "---|" * len(trees))
    for i, (step, _) in enumerate(STEPS):
        cells = []
        for tree in trees:
            rss = statistics.median(int(str(run[i][1])) for run in runs[tree]) / 1024
            _, _, apis, models = runs[tree][0][i]
            cells.append(f"{rss:.0f} ({apis} / {models})")
        print(f"| {step} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
