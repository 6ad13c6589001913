"""Reference engine keys: a table of representative LLMEngine specs and the key each one has today.

Why: an engine key names an artifact in every engine cache (docs/design.md §3). If the derivation
changes — a field added to or dropped from ``BuildSpec.key_inputs``, a default, a renamed value, the
canonical JSON, ``ENGINE_KEY_SCHEMA`` — every LLMEngine gets a new key and silently rebuilds, and
every cached artifact is orphaned (docs/install.md, "Upgrading"). So a key change must be a
deliberate, documented cache migration: bump ``ENGINE_KEY_SCHEMA``, say so in the release notes,
and only then update the literals below. A failure here means "you changed every user's engine
keys", not "update the table".

The literals were generated ONCE, from the code at the commit that added this file
(``prepare_engine("e", spec).key`` for each spec), and pasted here: they pin the derivation as it
was; nothing in this test derives an expected key from the function under test at test time.
Deliberate migration (issue 25 item 4, the default-``maxSeqLen`` rule): a spec that leaves a build
limit unset now carries ``build.derived_limits`` (the rule's name, ``DERIVED_LIMITS_RULE``) in its
key inputs; the five such rows got new literals, generated once from the code of that commit, and
``test_the_migration_only_added_the_rule_name`` pins the old literals as the keys without it. The
row with every limit set kept its key.

The specs cover both backends, every storage kind, model sources from the hub (with and without a
pinned revision) and S3, quantization with calibration, tensor and pipeline parallelism, explicit
build limits, and four GPU products.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine_builder.pipeline import load_spec
from engine_builder.planner.plan import DERIVED_LIMITS_RULE
from engine_builder.spec import engine_key
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.render.builder_job import BUILD_SPEC_DATA_KEY, desired_build_spec_configmap

IMAGE = "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"
S3 = {"s3": {"bucket": "engines", "prefix": "cache"}}

#: (name, spec, the key it had when this table was written)
REFERENCE: list[tuple[str, dict[str, Any], str]] = [
    (
        "tinyllama-fp8-h100",
        {
            "model": {"source": "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"},
            "runtime": {"image": IMAGE},
            "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
            "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
            "storage": S3,
        },
        "c866957c6d8cac48050bce6412eecb285440cd0384e405a46751e0f5704e9b4f",
    ),
    (
        "llama-8b-fp8-tp2-limits-pvc",
        {
            "model": {"source": "hf://meta-llama/Llama-3.1-8B-Instruct"},
            "backend": "tensorrt",
            "runtime": {"image": IMAGE},
            "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
            "parallelism": {"tensor": 2, "pipeline": 1},
            "build": {"maxBatchSize": 64, "maxNumTokens": 8192, "maxSeqLen": 8192},
            "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
            "storage": {"pvc": {"claimName": "engines", "subPath": "trtllm"}},
        },
        "44123c93251f06e852654e08b2ec8d602262ebe5430cadd59683d80f953c2b51",
    ),
    (
        "llama-70b-fp8-tp4-h200",
        {
            "model": {"source": "hf://meta-llama/Llama-3.1-70B-Instruct"},
            "runtime": {"image": IMAGE},
            "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
            "parallelism": {"tensor": 4},
            "gpu": {"product": "NVIDIA-H200"},
            "storage": S3,
        },
        "44351e94da179d61b5c56b60a18147a56677dcd7f24358c3cf063b3a3bf53e15",
    ),
    (
        "mistral-7b-int4-awq-calibrated-revision-l40s",
        {
            "model": {
                "source": "hf://mistralai/Mistral-7B-v0.3",
                "revision": "0d4b76e1efeb5eb6f6b5e757c79870472e04bd3a",
            },
            "runtime": {"image": IMAGE},
            "quantization": {"format": "int4_awq", "kvCacheDtype": "auto", "calibration": {"numSamples": 64}},
            "gpu": {"product": "NVIDIA-L40S"},
            "storage": S3,
        },
        "cd9d59b6d8339cfde3b343b07298515a23ae35dcb13a47c93b616dddbe899202",
    ),
    (
        "qwen3-8b-pytorch-unquantized-a100",
        {
            "model": {"source": "hf://Qwen/Qwen3-8B"},
            "backend": "pytorch",
            "runtime": {"image": IMAGE},
            "quantization": {"format": "none", "kvCacheDtype": "auto"},
            "gpu": {"product": "NVIDIA-A100-SXM4-80GB"},
            "storage": S3,
        },
        "c834e4282298e6850ac48466e91697fadc129ac7bd87ef90476ce08c5b289e53",
    ),
    (
        "s3-model-fp8-tp8-pp2-long-context",
        {
            "model": {"source": "s3://models/org/large-model"},
            "runtime": {"image": IMAGE},
            "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
            "parallelism": {"tensor": 8, "pipeline": 2},
            "build": {"maxSeqLen": 32768},
            "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
            "storage": S3,
        },
        "5e6c344e6c5d5a2a826dc98ad9e9640ceca50676b73fbb96877bff8ed48b64f2",
    ),
]


@pytest.mark.parametrize(("spec", "key"), [(s, k) for _, s, k in REFERENCE], ids=[n for n, _, _ in REFERENCE])
def test_the_operator_derives_the_reference_key(spec: dict[str, Any], key: str) -> None:
    prepared = prepare_engine("e", spec)
    assert isinstance(prepared, PreparedEngine), prepared
    assert prepared.key == key, (
        "the engine key of an unchanged spec changed: every cached engine would be rebuilt. If that is "
        "intended, it is a cache migration: bump ENGINE_KEY_SCHEMA, document it, then update this table."
    )


@pytest.mark.parametrize(("spec", "key"), [(s, k) for _, s, k in REFERENCE], ids=[n for n, _, _ in REFERENCE])
def test_the_builder_derives_the_same_key_from_its_build_spec_configmap(
    spec: dict[str, Any], key: str, tmp_path: Path
) -> None:
    """The builder loads the build spec from the Job's ConfigMap and names the artifact by the key it
    computes; it must be the operator's key, or the operator never finds the artifact."""
    prepared = prepare_engine("e", spec)
    assert isinstance(prepared, PreparedEngine), prepared
    engine = {"metadata": {"name": "e", "namespace": "team-a", "uid": "uid-1"}, "spec": spec}
    configmap = desired_build_spec_configmap(engine, prepared)
    path = tmp_path / BUILD_SPEC_DATA_KEY
    path.write_text(configmap["data"][BUILD_SPEC_DATA_KEY])
    assert load_spec(path).engine_key() == key


def test_the_reference_specs_are_distinct_engines() -> None:
    keys = [k for _, _, k in REFERENCE]
    assert len(set(keys)) == len(keys)


#: The keys of the rows that leave a limit unset before the default-maxSeqLen rule (planner-defaults/v2).
BEFORE_DERIVED_LIMITS = {
    "tinyllama-fp8-h100": "4a8dda0f8287f4239eab9d3d0a9b151068f6fc1b5082658aa9dfce97ec6fc607",
    "llama-70b-fp8-tp4-h200": "3d92f4066b7d8e8f15e7d8acbf26c47a830380de3922b376351970ba3513892f",
    "mistral-7b-int4-awq-calibrated-revision-l40s": (
        "f7fb08425d636ce1a4d87b464829098df77711f15e281167a8a577bd9e603a26"
    ),
    "qwen3-8b-pytorch-unquantized-a100": "0be9216febda9b5396c64ab3005c83a6e53b8bb7c6e688b557cf01395fbe4c08",
    "s3-model-fp8-tp8-pp2-long-context": "5bd131997b2de9829bb84e4ded54c1341d7e0c0969d5f8b8f49e94890e42925b",
}


@pytest.mark.parametrize(("name", "spec"), [(n, s) for n, s, _ in REFERENCE], ids=[n for n, *_ in REFERENCE])
def test_the_migration_only_added_the_rule_name(name: str, spec: dict[str, Any]) -> None:
    """Rows with an unset limit name the rule; without that one input they have their old key. Rows
    with every limit set have no such input (their key did not change)."""
    prepared = prepare_engine("e", spec)
    assert isinstance(prepared, PreparedEngine), prepared
    inputs = prepared.build_spec.key_inputs()
    if name not in BEFORE_DERIVED_LIMITS:
        assert "derived_limits" not in inputs["build"]
        return
    assert inputs["build"].pop("derived_limits") == DERIVED_LIMITS_RULE
    assert engine_key(inputs) == BEFORE_DERIVED_LIMITS[name]
