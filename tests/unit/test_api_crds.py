"""The checked-in CRDs are exactly what the models generate, and they are structural."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from trtllm_operator.api import (
    ENGINE_PLURAL,
    GROUP,
    LLMDeploymentSpec,
    LLMEngineSpec,
)
from trtllm_operator.api.crd import all_crds, deployment_crd, engine_crd, render_yaml
from trtllm_operator.cli import main

ROOT = Path(__file__).resolve().parents[2]
CRD_DIRS = [ROOT / "crds", ROOT / "charts" / "trtllm-operator" / "crds"]


@pytest.mark.parametrize("directory", CRD_DIRS, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.parametrize("name", sorted(all_crds()))
def test_checked_in_crd_is_fresh(directory: Path, name: str) -> None:
    path = directory / name
    assert path.exists(), f"{path} missing: run `make crds`"
    assert path.read_text(encoding="utf-8") == render_yaml(all_crds()[name]), (
        f"{path} is stale: run `make crds` and commit the result"
    )


def test_crds_command_check_detects_stale_and_writes(tmp_path: Path) -> None:
    out, chart = tmp_path / "crds", tmp_path / "chart"
    assert main(["crds", "--output-dir", str(out), "--chart-dir", str(chart), "--check"]) == 1
    assert main(["crds", "--output-dir", str(out), "--chart-dir", str(chart)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(all_crds())
    assert main(["crds", "--output-dir", str(out), "--chart-dir", str(chart), "--check"]) == 0
    (chart / f"{GROUP}_{ENGINE_PLURAL}.yaml").write_text("# edited by hand\n")
    assert main(["crds", "--output-dir", str(out), "--chart-dir", str(chart), "--check"]) == 1


def _make_crds_arguments() -> list[str]:
    """The arguments the Makefile's ``crds`` target passes to ``trtllm-operator crds``."""
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("\ncrds:", 1)[1].split("\n\n", 1)[0]
    line = next(line for line in recipe.splitlines() if "trtllm-operator crds" in line)
    return line.split("trtllm-operator crds", 1)[1].split()


def test_make_crds_regenerates_every_generated_file_docs_api_md_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fresh-user trial 44 F15: docs/engine-builder.md and docs/api.md say ``make crds`` regenerates
    docs/api.md; the target passed no ``--api-docs``. Its arguments, run with ``--check`` from the
    repository root, cover every generated file these tests check (and find them fresh)."""
    args = _make_crds_arguments()
    assert "--api-docs docs/api.md" in " ".join(args), args
    dirs = {Path(v) for f, v in itertools.pairwise(args) if f in {"--output-dir", "--chart-dir"}}
    assert {ROOT / d for d in dirs} == set(CRD_DIRS)
    monkeypatch.chdir(ROOT)
    assert main(["crds", *args, "--check"]) == 0


@pytest.mark.parametrize("flag", ["--output-dir", "--chart-dir"])
def test_crds_directory_that_cannot_be_written_is_an_error_not_a_traceback(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 44 F15: ``crds --output-dir /proc/x`` ended in a FileNotFoundError traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    bad = blocker / "crds"  # under a file: cannot be created, whoever runs the test
    args = ["crds", "--output-dir", str(tmp_path / "ok"), "--chart-dir", str(tmp_path / "ok2")]
    args[args.index(flag) + 1] = str(bad)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trtllm-operator crds: error: {flag} {bad}: cannot write {bad}/"), err
    assert "Fix: name a directory that exists or can be created, and that you can write" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for key, child in node.get("properties", {}).items():
        found += _walk(child, f"{path}.{key}")
    if "items" in node:
        found += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += _walk(node["additionalProperties"], f"{path}{{}}")
    return found


@pytest.mark.parametrize("crd", [engine_crd(), deployment_crd()], ids=["engine", "deployment"])
def test_schema_is_structural_and_documented(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    text = yaml.safe_dump(schema)
    assert "$ref" not in text and "allOf" not in text
    preserve = []
    for path, node in _walk(schema):
        if node.get("x-kubernetes-int-or-string"):  # a quantity: the one anyOf a structural schema allows
            assert "type" not in node and node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert "type" in node and "anyOf" not in node, f"{path} has no type, or an anyOf"
        if path.startswith((".spec", ".status")) and not path.endswith(("[]", "{}")):
            assert node.get("description"), f"{path} has no description (kubectl explain text)"
        if node.get("x-kubernetes-preserve-unknown-fields"):
            preserve.append(path)
    # No passthrough: core/v1 Affinity is typed (validated and bounded at admission like on the pod).
    assert preserve == []


def test_scale_subresource_and_columns() -> None:
    version = deployment_crd()["spec"]["versions"][0]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    names = [c["name"] for c in version["additionalPrinterColumns"] if "priority" not in c]
    assert names == ["Engine", "Ready", "Desired", "Active%", "KV%", "Phase", "Age"]
    # -o wide also shows the key the pods serve (trial 46 T7: Engine names spec.engineRef, which
    # may not be what is served), from the status field that holds it
    wide = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"] if c.get("priority") == 1}
    assert wide == {"Key": ".status.engineKey", "API": ".spec.server.api", "Endpoint": ".status.endpoint"}
    assert "engineKey" in version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    engine = engine_crd()["spec"]["versions"][0]
    assert engine["subresources"] == {"status": {}}
    names = [c["name"] for c in engine["additionalPrinterColumns"] if "priority" not in c]
    assert names == ["Phase", "Stage", "Progress", "Quant", "TP", "PP", "GPU", "Key", "Partial", "Age"]


def test_the_columns_row_of_api_md_names_the_crds_columns() -> None:
    """docs/api.md's hand-written "columns" row lists every printer column, in order, the wide ones
    (priority 1) after "(+" — it missed the LLMDeployment's Key column when that was added."""
    row = next(
        line for line in (ROOT / "docs" / "api.md").read_text().splitlines() if line.startswith("| columns |")
    )
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    for cell, crd in zip(cells, (engine_crd(), deployment_crd()), strict=True):
        columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
        plain = ", ".join(c["name"] for c in columns if "priority" not in c)
        wide = ", ".join(c["name"] for c in columns if "priority" in c)
        assert cell.startswith(f"{plain} (+ {wide} with `-o wide`"), (cell, plain, wide)


def test_nested_defaults_match_the_models() -> None:
    """The CRD's object defaults are the models' own defaults, so API server and operator agree."""
    spec = engine_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["quantization"]["default"] == {
        "format": "none",
        "kvCacheDtype": "auto",
        "calibration": {"dataset": "cnn_dailymail", "batchSize": 32, "maxSeqLength": 512},
    }
    minimal = LLMDeploymentSpec.model_validate({"engineRef": {"name": "x"}})
    dspec = deployment_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert dspec["properties"]["rollout"]["default"] == minimal.rollout.model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    assert LLMEngineSpec.model_fields["backend"].default == spec["properties"]["backend"]["default"]


def test_last_decisions_count_is_the_one_the_operator_keeps_in_every_doc() -> None:
    """Trial 34: docs/autoscaling.md said "the last 10 decisions", docs/api.md (from the schema) only
    "≤ 20 items, recent decisions": the field's description and both docs name the count the
    autoscaler keeps (handlers.autoscaler.MAX_DECISIONS) and the schema's bound."""
    from trtllm_operator.api.deployment import LLMDeploymentStatus  # noqa: PLC0415
    from trtllm_operator.handlers.autoscaler import MAX_DECISIONS  # noqa: PLC0415

    schema = LLMDeploymentStatus.model_json_schema(by_alias=True)
    field = schema["$defs"]["AutoscalingStatus"]["properties"]["lastDecisions"]
    bound = next(v["maxItems"] for v in field["anyOf"] if v.get("type") == "array")
    assert f"The last {MAX_DECISIONS} decisions" in field["description"]
    assert f"the schema admits {bound}" in field["description"]
    assert f"the last {MAX_DECISIONS} decisions" in (ROOT / "docs" / "autoscaling.md").read_text()
    assert f"The last {MAX_DECISIONS} decisions" in (ROOT / "docs" / "api.md").read_text()
