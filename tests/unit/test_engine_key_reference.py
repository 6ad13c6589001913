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
Two deliberate migrations since, each generated once from the code of its commit: ``engine-key/v2``
(issue 26: calibration defaults; docs/install.md "Upgrade") changed every row; the default-``maxSeqLen``
rule (issue 25 item 4) adds ``build.derived_limits`` (the rule's name, ``DERIVED_LIMITS_RULE``) to the
key inputs of a spec that leaves a build limit unset — ``test_the_migration_only_added_the_rule_name``
pins the ``engine-key/v2`` literals as those rows' keys without it. The row with every limit set has
no such input.

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
        "df91a65019030ddbc3c8deca1b2e8ceccb37f61cdbebefc9fc4c5fc96c17d1d5",
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
        "d3e52a5986ccfdb7beac990da33ec9364cdf84cef92e51d75da204aaa7bf60ca",
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
        "c4b70b587d5f173f21cbee161e6eb4fc15557c6629ef3e66e1fb61831ea143c0",
    ),
    (
        "mistral-7b-int4-awq-calibrated-revision-l40s",
        {
            "model": {
                "source": "hf://mistralai/Mistral-7B-v0.3",
                "revision": "0d4b76e1efeb5eb6f6b5e757c79870472e04bd3a",
            },
            "runtime": {"image": IMAGE},
            "quantization": {"format": "int4_awq", "kvCacheDtype": "auto", "calibration": {"numSamples": 32}},
            "gpu": {"product": "NVIDIA-L40S"},
            "storage": S3,
        },
        "b0e6ec6ed5880666e9b97ba717127be831c3b16b1e29e6887673862697f8750b",
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
        "82dbd96bb17267ea4d177ce50b953d2c7ea39fd1e485cc1fa65220c016babf9d",
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
        "feab0fb48eae3c8b02dacb5088424769cd3d5d2d67875f0c4e9a8d3383ee45ae",
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


#: The keys of the rows that leave a limit unset under ``engine-key/v2`` before the default-maxSeqLen
#: rule (planner-defaults/v2): the literals of the v2 migration commit.
BEFORE_DERIVED_LIMITS = {
    "tinyllama-fp8-h100": ("b4bc0eda70d247ddf72706fa09464b69cf1fd3e5345b4c4c53ff2038a891dbac"),
    "llama-70b-fp8-tp4-h200": ("0256750340b7495ce48aac5df30407c65a7afdc84093d9cbe1b045e65cd3c817"),
    "mistral-7b-int4-awq-calibrated-revision-l40s": (
        "6180e3eb0581f0c3293d492677b5cde75b7460867fc08ed2369846897075f4c3"
    ),
    "qwen3-8b-pytorch-unquantized-a100": ("f94f902357fa1c46a8ad5896a3c9b51fe155f7aa9538156e0fa9230b70760892"),
    "s3-model-fp8-tp8-pp2-long-context": ("350d65d8cf84a6ea4df4cc319144bbf7d0d1c510d122445a9b25336aaec77c18"),
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
