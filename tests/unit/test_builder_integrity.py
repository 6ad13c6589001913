"""Issue 24 item 4, builder side: ``auto_map`` to another repository stripped at packaging; paths
outside the model directory refused at fetch (S3 keys, Hub file names, ``pvc://`` paths, links)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from engine_builder.fetch import check_links, parse_source, safe_name
from engine_builder.package import strip_foreign_auto_map
from engine_builder.report import BuildError
from engine_builder.tinymodel import make_tiny_model

FOREIGN = "attacker/repo--tokenization_evil.EvilTokenizer"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny")
    make_tiny_model(path)
    return path


def _with_auto_map(src: Path, dest: Path, file: str, auto_map: dict[str, Any]) -> None:
    dest.mkdir()
    for p in src.iterdir():
        os.link(p, dest / p.name)  # as package's copy does (hard links where it can)
    data = json.loads((src / file).read_text())
    data["auto_map"] = auto_map
    (dest / file).unlink()
    (dest / file).write_text(json.dumps(data))


def test_foreign_auto_map_entries_are_removed_and_local_ones_kept(tiny: Path, tmp_path: Path) -> None:
    art = tmp_path / "tokenizer"
    _with_auto_map(
        tiny, art, "tokenizer_config.json", {"AutoTokenizer": [FOREIGN, None], "AutoConfig": "cfg.Local"}
    )
    config_before = (tiny / "config.json").read_text()
    removed = strip_foreign_auto_map(art)
    assert removed == [f'tokenizer/tokenizer_config.json: auto_map.AutoTokenizer = ["{FOREIGN}", null]']
    assert json.loads((art / "tokenizer_config.json").read_text())["auto_map"] == {"AutoConfig": "cfg.Local"}
    assert (tiny / "config.json").read_text() == config_before  # the source is untouched
    assert strip_foreign_auto_map(art) == []


def test_a_stripped_tokenizer_loads_offline_without_remote_code(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What Triton's preprocessing model does (``AutoTokenizer.from_pretrained(dir,
    trust_remote_code=True)``) in a serving pod (``HF_HUB_OFFLINE=1``): with the foreign
    ``auto_map`` transformers goes for the other repository's code; stripped, it loads the
    tokenizer from the files alone."""
    import huggingface_hub.constants as hub_constants  # noqa: PLC0415
    from transformers import AutoTokenizer  # noqa: PLC0415

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    art = tmp_path / "tokenizer"
    _with_auto_map(tiny, art, "tokenizer_config.json", {"AutoTokenizer": [FOREIGN, None]})
    with pytest.raises(Exception, match=r"attacker/repo|offline|connect|not found|cannot"):
        AutoTokenizer.from_pretrained(str(art), trust_remote_code=True)
    strip_foreign_auto_map(art)
    tok = AutoTokenizer.from_pretrained(str(art), trust_remote_code=True)
    assert tok("hello world")["input_ids"]
    assert not (tmp_path / "hf-home" / "modules").exists() or not any(
        (tmp_path / "hf-home" / "modules").rglob("*.py")
    )


@pytest.mark.parametrize("name", ["../config.json", "/etc/passwd", "a/../../x.safetensors", "a\\..\\b"])
def test_s3_keys_and_hub_names_outside_the_directory_are_refused(name: str) -> None:
    with pytest.raises(BuildError) as err:
        safe_name(name, "s3://bucket/model/")
    assert err.value.reason == "ModelNotFound" and repr(name) in str(err.value)
    assert safe_name("sub/model.safetensors", "s3://b/p/") == "sub/model.safetensors"


def test_pvc_paths_stay_inside_the_claim() -> None:
    with pytest.raises(BuildError, match="inside the claim"):
        parse_source("pvc://models/../../etc")
    assert parse_source("pvc://models/llama").location == "/models/models/llama"


def test_links_out_of_the_claim_are_refused(tmp_path: Path) -> None:
    claim = tmp_path / "claim"
    (claim / "blobs").mkdir(parents=True)
    (claim / "blobs/abc").write_text("{}")
    snap = claim / "snapshots/sha"
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to(claim / "blobs/abc")  # a Hugging Face cache snapshot: fine
    check_links(snap, claim)
    (snap / "tokenizer.json").symlink_to("/etc/passwd")
    with pytest.raises(BuildError, match="outside") as err:
        check_links(snap, claim)
    assert err.value.reason == "ModelNotFound"


class _Planted:
    """Unpickling this runs ``Path(marker).touch()``: what a planted modelopt_state.pth would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_a_planted_modelopt_state_is_not_unpickled(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``convert`` restores the quantize stage's state with ``weights_only=True``: a pickle that
    runs code on load (someone else wrote the work volume) fails the stage instead of running.
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` makes torch's default unpickle everything (as torch < 2.6
    did), so only the explicit argument keeps the marker from being created."""
    import torch  # noqa: PLC0415

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    from engine_builder.convert import convert  # noqa: PLC0415
    from engine_builder.spec import BuildSpec  # noqa: PLC0415

    marker = tmp_path / "code-ran"
    state = tmp_path / "modelopt_state.pth"
    torch.save({"modelopt_state": _Planted(marker), "model_state_dict": {}}, state)
    spec = BuildSpec.model_validate(
        {
            "model": {"uri": str(tiny)},
            "backend": "tensorrt",
            "runtime_image": "nvcr.io/nvidia/tritonserver:25.05-trtllm-python-py3",
            "quantization": {"format": "fp8"},
            "target": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "sm": 90},
            "output": {"artifact_root": str(tmp_path / "artifacts")},
        }
    )
    with pytest.raises(BuildError) as err:
        convert(spec, tiny, state, tmp_path / "checkpoint", None)
    assert err.value.reason == "ConversionFailed" and "modelopt_state" in str(err.value)
    assert not marker.exists(), "the planted pickle ran"
