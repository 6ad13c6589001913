"""Calibration that means what it says: the sample count is used exactly or refused, NVIDIA's recipe is
the default (TensorRT-LLM ``tensorrt_llm/quantization/quantize_by_modelopt.py`` ``get_calib_dataloader``,
TL@042c510d / TL@585c7565: cnn_dailymail config 3.0.0, ``article`` column, 512 samples of at most 512
tokens, left padding), the bundled text only as an explicit offline choice, and a clear failure when
the default dataset cannot be fetched. The operator refuses what the builder would refuse and reports
what was used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from support.ports import bound_socket

from engine_builder.planner.formats import BUNDLED_CALIBRATION_SAMPLES, bundled_calibration_texts
from engine_builder.quantize import calibration_batches, calibration_tokens, load_calibration_texts
from engine_builder.report import BuildError, build_report
from engine_builder.spec import Calibration, Quantization
from engine_builder.tinymodel import make_tiny_model
from trtllm_operator.decide.engine_failure import parse_report
from trtllm_operator.decide.engine_spec import InvalidEngine, PreparedEngine, prepare_engine


def test_defaults_are_nvidias_recipe() -> None:
    cal = Calibration()
    assert (cal.dataset, cal.num_samples, cal.max_seq_length) == ("cnn_dailymail", None, 512)
    assert Quantization(format="fp8").calibration_samples == 512
    # quantize_by_modelopt.py: "AWQ calibration could take longer … Using calib_size=32 instead".
    assert Quantization(format="int4_awq").calibration_samples == 32


def test_awq_with_more_than_32_samples_is_refused_not_clamped() -> None:
    with pytest.raises(ValidationError, match="at most 32"):
        Quantization(format="int4_awq", calibration=Calibration(num_samples=64))
    assert Quantization(format="int4_awq", calibration=Calibration(num_samples=32)).calibration_samples == 32


def test_the_bundled_set_is_refused_for_more_samples_than_it_holds(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=f"holds {BUNDLED_CALIBRATION_SAMPLES} samples"):
        Quantization(format="fp8", calibration=Calibration(dataset="bundled"))
    texts = load_calibration_texts(Calibration(dataset="bundled"), BUNDLED_CALIBRATION_SAMPLES)
    assert texts == bundled_calibration_texts()
    with pytest.raises(BuildError) as err:
        load_calibration_texts(Calibration(dataset="bundled"), BUNDLED_CALIBRATION_SAMPLES + 1)
    assert err.value.reason == "BadSpec"
    assert err.value.field == "quantization.calibration.num_samples"
    assert f"holds only {BUNDLED_CALIBRATION_SAMPLES}" in err.value.message


@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_a_local_file_gives_exactly_num_samples_or_a_refusal(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"calib{suffix}"
    rows = [f"sample number {i}" for i in range(5)]
    lines = [json.dumps({"text": r}) for r in rows] if suffix == ".jsonl" else rows
    path.write_text("\n".join(lines) + "\n")
    assert load_calibration_texts(Calibration(dataset=str(path)), 5) == rows
    assert load_calibration_texts(Calibration(dataset=str(path)), 3) == rows[:3]
    with pytest.raises(BuildError) as err:
        load_calibration_texts(Calibration(dataset=str(path)), 6)
    assert (err.value.reason, err.value.field) == ("BadSpec", "quantization.calibration.num_samples")
    assert "6 calibration samples requested" in err.value.message and "holds only 5" in err.value.message


def test_a_local_dataset_directory_is_read_with_the_datasets_library(tmp_path: Path) -> None:
    """Upstream: a local dataset directory → ``load_dataset(dir, split="train")["text"]``."""
    data = tmp_path / "my-calib"
    data.mkdir()
    (data / "train.jsonl").write_text("\n".join(json.dumps({"text": f"row {i}"}) for i in range(7)) + "\n")
    assert load_calibration_texts(Calibration(dataset=str(data)), 4) == [f"row {i}" for i in range(4)]
    with pytest.raises(BuildError) as err:
        load_calibration_texts(Calibration(dataset=str(data)), 8)
    assert err.value.field == "quantization.calibration.num_samples"


def test_an_unreachable_hub_fails_the_default_dataset_clearly(request: pytest.FixtureRequest) -> None:
    """No silent fallback to the bundled text: DownloadFailed naming the dataset and the offline fix."""
    closed = bound_socket()  # held, never listening: connections to its port are refused
    request.addfinalizer(closed.close)
    code = (
        "import json\n"
        "from engine_builder.quantize import load_calibration_texts\n"
        "from engine_builder.report import BuildError\n"
        "from engine_builder.spec import Calibration\n"
        "try:\n"
        "    load_calibration_texts(Calibration(), 512, token='hf_secret')\n"
        "except BuildError as e:\n"
        "    print(json.dumps({'reason': e.reason, 'field': e.field, 'message': e.message}))\n"
    )
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{closed.getsockname()[1]}",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "5",
        "HF_HOME": str(Path(request.config.rootpath) / ".pytest_cache" / "hf-home-empty"),
    }
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_DATASETS_OFFLINE", None)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    failure = json.loads(proc.stdout.strip().splitlines()[-1])
    assert failure["reason"] == "DownloadFailed"
    assert failure["field"] == "quantization.calibration.dataset"
    assert "'cnn_dailymail'" in failure["message"] and "with the model's token" in failure["message"]
    assert "'bundled'" in failure["message"]
    assert "hf_secret" not in failure["message"]


def test_batches_are_left_padded_truncated_and_on_the_device(tmp_path: Path) -> None:
    model_dir = tmp_path / "tiny"
    make_tiny_model(model_dir)
    texts = ["short", "a much longer sample that has many more tokens than the first one does " * 4, "x"]
    batches = calibration_batches(model_dir, texts, 2, 16, "cpu")
    assert [int(b["input_ids"].shape[0]) for b in batches] == [2, 1]
    assert int(batches[0]["input_ids"].shape[1]) == 16  # truncated at max_seq_length
    mask = batches[0]["attention_mask"]
    assert int(mask[0, 0]) == 0 and int(mask[0, -1]) == 1  # the short sample is padded on the left
    assert calibration_tokens(batches) == int(sum(int(b["attention_mask"].sum()) for b in batches))
    assert str(batches[0]["input_ids"].device) == "cpu"


def test_the_report_carries_the_calibration_and_the_operator_reads_it() -> None:
    calibration = {
        "dataset": "cnn_dailymail",
        "samples": 512,
        "tokens": 250_000,
        "batchSize": 32,
        "maxSeqLength": 512,
    }
    report = build_report(status="Succeeded", engine_key="k" * 64, calibration=calibration)
    parsed = parse_report(json.dumps(report))
    assert parsed is not None and parsed.calibration == calibration
    assert parse_report(json.dumps(build_report(status="Succeeded"))).calibration is None  # type: ignore[union-attr]


ENGINE = {
    "model": {"source": "hf://meta-llama/Llama-3.1-8B-Instruct"},
    "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
    "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
    "storage": {"createPVC": {"size": "50Gi"}},
}


@pytest.mark.parametrize(
    ("quantization", "samples", "dataset"),
    [
        ({"format": "fp8", "kvCacheDtype": "fp8"}, 512, "cnn_dailymail"),
        ({"format": "int4_awq"}, 32, "cnn_dailymail"),
        ({"format": "fp8", "calibration": {"dataset": "bundled", "numSamples": 101}}, 101, "bundled"),
    ],
)
def test_the_operator_resolves_the_sample_count_into_the_build_spec(
    quantization: dict[str, object], samples: int, dataset: str
) -> None:
    prepared = prepare_engine("e", {**ENGINE, "quantization": quantization})
    assert isinstance(prepared, PreparedEngine), prepared
    cal = prepared.build_spec.quantization.calibration
    assert (cal.num_samples, cal.dataset, cal.batch_size) == (samples, dataset, 32)


@pytest.mark.parametrize(
    ("quantization", "fragment"),
    [
        ({"format": "int4_awq", "calibration": {"numSamples": 64}}, "at most 32 samples"),
        ({"format": "fp8", "calibration": {"dataset": "bundled"}}, "holds 101 samples but 512"),
    ],
)
def test_the_operator_refuses_what_the_builder_would_refuse(
    quantization: dict[str, object], fragment: str
) -> None:
    invalid = prepare_engine("e", {**ENGINE, "quantization": quantization})
    assert isinstance(invalid, InvalidEngine), invalid
    assert invalid.field == "spec.quantization.calibration.numSamples"
    assert fragment in invalid.message


#: What the previous release's CRD stored in an LLMEngine created without a calibration, written out
#: from that CRD (``git show 3898a0c:crds/llm.trtllm-operator.dev_llmengines.yaml``,
#: ``spec.quantization.default.calibration``), not taken from the operator's constant.
PREVIOUS_RELEASE_STORED = {"dataset": "bundled", "numSamples": 512, "batchSize": 1, "maxSeqLength": 512}


@pytest.mark.parametrize("fmt", ["fp8", "int4_awq", "none"])
def test_the_previous_crds_stored_calibration_default_reads_as_unset(fmt: str) -> None:
    """An engine the previous release stored with its CRD's calibration default is prepared exactly
    like the same engine without calibration: this release's defaults, the same build and key."""
    stored = prepare_engine(
        "e", {**ENGINE, "quantization": {"format": fmt, "calibration": PREVIOUS_RELEASE_STORED}}
    )
    unset = prepare_engine("e", {**ENGINE, "quantization": {"format": fmt}})
    assert isinstance(stored, PreparedEngine), stored
    assert isinstance(unset, PreparedEngine), unset
    assert stored.build_spec == unset.build_spec
    assert stored.key == unset.key


@pytest.mark.parametrize("change", [{"numSamples": 511}, {"batchSize": 2}, {"maxSeqLength": 256}])
def test_a_calibration_other_than_the_previous_default_is_read_as_written(change: dict[str, int]) -> None:
    """Only the exact previous default is read as unset: anything else the user wrote is theirs, and
    bundled with more samples than it holds stays refused."""
    written = {**PREVIOUS_RELEASE_STORED, **change}
    invalid = prepare_engine("e", {**ENGINE, "quantization": {"format": "fp8", "calibration": written}})
    assert isinstance(invalid, InvalidEngine), invalid
    assert invalid.field == "spec.quantization.calibration.numSamples"
