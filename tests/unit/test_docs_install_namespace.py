"""Every Helm install, upgrade or uninstall of the operator in the docs and the demo's "Go further"
text uses the namespace docs/install.md installs into (fresh-user trial 42 F11: docs/demo.md and the
demo said ``trtllm-operator``, docs/install.md ``trtllm-system``, so its uninstall found no release)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: A flag that names a namespace, and what shows the line is about the operator's own install
#: (``trtllm-operator run -n NS`` names the namespaces it watches, another thing).
NAMESPACE_FLAG = re.compile(r"(?:--namespace|-n)[ =]([a-z0-9][-a-z0-9]*)")
OPERATOR_INSTALL = re.compile(r"helm (?:install|upgrade|uninstall)|charts/trtllm-operator")


def install_namespace() -> str:
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    found = re.search(r"helm install trtllm-operator charts/trtllm-operator\s*\\?\s*--namespace (\S+)", text)
    assert found is not None, (
        "docs/install.md no longer shows `helm install trtllm-operator … --namespace NS`"
    )
    return found.group(1)


def operator_namespaces(path: Path) -> list[tuple[int, str]]:
    """``(line number, namespace)`` of each namespace flag on a line that installs the operator with
    Helm (or continues such a line)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        context = line if i == 0 else lines[i - 1] + line
        if OPERATOR_INSTALL.search(context):
            out += [(i + 1, ns) for ns in NAMESPACE_FLAG.findall(line)]
    return out


def test_docs_and_demo_install_the_operator_where_docs_install_md_does() -> None:
    namespace = install_namespace()
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "hack" / "demo" / "driver.py"]
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {ns}"
        for path in files
        for line, ns in operator_namespaces(path)
        if ns != namespace
    ]
    assert wrong == [], f"the operator's namespace is {namespace} (docs/install.md): {wrong}"
    assert operator_namespaces(ROOT / "docs" / "demo.md"), "docs/demo.md's helm install is no longer seen"
    assert operator_namespaces(ROOT / "hack" / "demo" / "driver.py"), "the demo's helm install is not seen"


def test_every_helm_install_block_creates_the_namespaces_it_watches_first() -> None:
    """Fresh-user trial 46 T4: docs/install.md's first block ran `helm install … --set
    'watchNamespaces={team-a}'` alone, which the chart refuses on a cluster without team-a
    (`watchNamespaces: namespace "team-a" does not exist`); docs/demo.md's block created its
    namespace first. Every fenced block of the docs that installs the operator with watchNamespaces
    creates each of them (`kubectl create namespace NS`) before the `helm install`."""
    fence = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
    missing = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in fence.findall(path.read_text(encoding="utf-8")):
            install = re.search(r"^helm install .*?watchNamespaces=\{([^}]*)\}", block, re.S | re.M)
            if install is None:
                continue
            created = set(re.findall(r"^kubectl create namespace (\S+)", block[: install.start()], re.M))
            missing += [
                f"{path.relative_to(ROOT)}: {ns}" for ns in install.group(1).split(",") if ns not in created
            ]
    assert missing == [], f"helm install blocks that watch a namespace they do not create first: {missing}"
