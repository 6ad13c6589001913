"""The invalid-manifest corpus is well formed: headers, one object each, defects where they claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from trtllm_operator.api import DEPLOYMENT_KIND, ENGINE_KIND

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = sorted((FIXTURES / "invalid").glob("*.yaml"))
BASES = {
    ENGINE_KIND: yaml.safe_load((FIXTURES / "valid" / "minimal-engine.yaml").read_text()),
    DEPLOYMENT_KIND: yaml.safe_load((FIXTURES / "valid" / "minimal-deployment.yaml").read_text()),
}


def header(path: Path, key: str) -> list[str]:
    prefix = f"# {key}: "
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line[len(prefix) :] for line in lines if line.startswith(prefix)]


def changed_paths(base: Any, doc: Any, path: str = "") -> set[str]:
    """Dotted paths where ``doc`` differs from ``base`` (an added or removed subtree counts once)."""
    if isinstance(base, dict) and isinstance(doc, dict):
        out: set[str] = set()
        for key in base.keys() | doc.keys():
            sub = f"{path}.{key}" if path else key
            if key not in base or key not in doc:
                out.add(sub)
            else:
                out |= changed_paths(base[key], doc[key], sub)
        return out
    return set() if base == doc else {path}


def test_corpus_has_cases_of_both_kinds() -> None:
    kinds = [yaml.safe_load(p.read_text())["kind"] for p in CORPUS]
    assert len(CORPUS) >= 160
    assert kinds.count(ENGINE_KIND) >= 90 and kinds.count(DEPLOYMENT_KIND) >= 60


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_case_is_one_documented_defect(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    assert len(docs) == 1, "one object per file"
    (defect,) = header(path, "defect")
    assert defect
    expects = header(path, "expect")
    assert expects, "at least one '# expect:' line"
    field = expects[0]
    assert field.startswith(("spec.", "metadata.")), "the first expect names the offending field"
    changed = changed_paths(BASES[docs[0]["kind"]], docs[0])
    assert changed, "the case must differ from the minimal valid manifest"
    bare = field.replace("[0]", "")
    assert any(bare.startswith(c) or c.startswith(bare) for c in changed), (
        f"expected field {field} is not where the manifest was changed: {sorted(changed)}"
    )
