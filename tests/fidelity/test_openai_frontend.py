"""``spec.server.api: openai`` served for real: Triton's OpenAI frontend on this machine's CPU Triton.

The operator renders an ``api: openai`` deployment of an artifact the real engine-builder produced
here (tiny Llama, tensorrt backend, no quantization, TP 1); its ``launch.sh`` runs as a pod runs it
(``tritoncpu.run_launch_script``): the model repository is assembled, then ``exec python3
/opt/tritonserver/python/openai/openai_frontend/main.py …`` starts Triton in-process with the CPU
stand-in for the TensorRT-LLM engine. The frontend is upstream's ``python/openai`` at r26.03 on the
r26.03 ``tritonserver`` Python API, linked to the CPU runtime's Triton 2.51 core, both vendored in
``hack/tritoncpu/vendor/triton-r26.03/`` (``hack/tritoncpu/openai_frontend.py`` says how and what
differs from the image; docs/triton-cpu.md).

Checked: ``/health/ready``; ``/v1/models`` lists the served model name; a chat completion through
the ``openai`` Python client (the docs' example) returns text and not the prompt; a streamed chat
completion arrives as several server-sent events; ``/v1/completions`` with ``echo``; ``/metrics`` on
the same port carries the TensorRT-LLM families the autoscaler reads, and its own parser reads them.

The first run on a machine builds the overlay (PyPI packages through uv's cache, the bindings with
g++) and caches it in ``~/.cache/trtllm-operator/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine_builder.artifact_check import MANIFEST, manifest_digest, sha256_file
from engine_builder.pipeline import Options, run
from engine_builder.tinymodel import make_tiny_model
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.decide.serving import ServingPlan, plan_serving
from trtllm_operator.metrics.signals import signals_from_text
from trtllm_operator.render.children import render_plan
from trtllm_operator.render.model_repository import volume_items
from trtllm_operator.render.serving import OPENAI_FRONTEND_MAIN, OPENAI_PORT

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
import tritoncpu  # noqa: E402
from tritoncpu import openai_frontend  # noqa: E402

pytestmark = [pytest.mark.slow]

SERVED = "tiny-llama"
#: A chat template, as an instruct model's tokenizer_config.json carries one (the tiny test model
#: is not an instruct model and has none).
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def engine_doc() -> dict[str, Any]:
    return {
        "metadata": {"name": "tiny-openai", "namespace": "fidelity"},
        "spec": {
            "model": {"source": "pvc://models/tiny-llama"},
            "backend": "tensorrt",
            "runtime": {"image": "nvcr.io/nvidia/tritonserver:26.03-trtllm-python-py3"},
            "quantization": {"format": "none"},
            "parallelism": {"tensor": 1, "pipeline": 1},
            "build": {"maxBatchSize": 16, "maxNumTokens": 1024, "maxInputLen": 256, "maxSeqLen": 512},
            "gpu": {"product": "NVIDIA-H100-80GB-HBM3"},
            "storage": {"pvc": {"claimName": "engine-store"}},
        },
    }


def build_artifact(volumes: Path) -> tuple[dict[str, Any], Path]:
    """The real engine-builder (in-process) on the operator's build spec; returns the Ready engine."""
    make_tiny_model(volumes / "models" / "tiny-llama")
    doc = engine_doc()
    prepared = prepare_engine(doc["metadata"]["name"], doc["spec"])
    assert isinstance(prepared, PreparedEngine), prepared
    store = volumes / "engine-store"
    out = prepared.build_spec.output.model_copy(
        update={"artifact_root": str(store), "termination_log": str(volumes / "term")}
    )
    spec_path = volumes / "build.yaml"
    spec_path.write_text(
        yaml.safe_dump(prepared.build_spec.model_copy(update={"output": out}).model_dump(mode="json"))
    )
    code = run(spec_path, volumes / "work", None, Options(skip_compile=True, pvc_root=str(volumes)))
    assert code == 0, (volumes / "term").read_text()
    doc["status"] = {
        "engineKey": prepared.key,
        "phase": "Ready",
        "artifact": {"uri": f"pvc://engine-store/{prepared.key}"},
    }
    return doc, store / prepared.key


def as_instruct_tokenizer(artifact: Path) -> None:
    """Give the artifact's tokenizer a chat template, and the class name transformers 4 reads.

    The builder here runs transformers 5, which writes ``tokenizer_class: TokenizersBackend``; the
    r26.03 frontend needs transformers 4 (it calls ``all_special_tokens_extended``), whose
    ``PreTrainedTokenizerFast`` reads the same ``tokenizer.json``. A builder in the 26.03 image
    writes with that image's transformers. The file's entry in ``manifest.json`` and the manifest's
    digest are recorded again (as the builder's ``package`` stage records them), so the pod's
    artifact check (``verify-artifact.py``) passes for the edited file and nothing else changes.
    """
    path = artifact / "tokenizer" / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["chat_template"] = CHAT_TEMPLATE
    path.write_text(json.dumps(config, indent=2))
    manifest = json.loads((artifact / MANIFEST).read_text())
    (entry,) = (f for f in manifest["files"] if f["path"] == "tokenizer/tokenizer_config.json")
    entry.update(size=path.stat().st_size, sha256=sha256_file(path))
    manifest["manifestDigest"] = manifest_digest(manifest)
    (artifact / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def get(url: str, timeout: float = 30) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def post(url: str, body: dict[str, Any], timeout: float = 120) -> str:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return str(r.read().decode())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, openai_frontend.Overlay]]:
    overlay = openai_frontend.overlay()
    volumes = tmp_path_factory.mktemp("volumes")
    engine, artifact = build_artifact(volumes)
    as_instruct_tokenizer(artifact)
    deployment = {
        "metadata": {"name": "oai", "namespace": "fidelity", "uid": "0"},
        "spec": {
            "engineRef": {"name": engine["metadata"]["name"]},
            "server": {"api": "openai", "decoupled": True, "openai": {"servedModelName": SERVED}},
        },
    }
    plan = plan_serving(deployment, engine, gpus_per_node=8, lws_installed=False)
    assert isinstance(plan, ServingPlan), plan
    configmap = render_plan(plan).configmap
    assert configmap is not None and OPENAI_FRONTEND_MAIN in configmap["data"]["launch.sh"]
    address = f"127.{100 + os.getpid() % 100}.1.9"
    with socket.socket() as probe:
        assert probe.connect_ex((address, OPENAI_PORT)) != 0, f"{address}:{OPENAI_PORT} is already in use"
    work = tmp_path_factory.mktemp("pod")
    server = tritoncpu.run_launch_script(
        configmap["data"],
        volume_items(configmap),
        artifact,
        address=address,
        work_dir=work,
        extra_mounts={str(Path(OPENAI_FRONTEND_MAIN).parents[1]): str(overlay.frontend)},
        extra_env=overlay.env(work / "backends"),
    )
    base = f"http://{address}:{OPENAI_PORT}"
    try:
        deadline = time.monotonic() + 300
        while True:
            code = 0
            with contextlib.suppress(OSError):
                code, _ = get(f"{base}/health/ready", timeout=5)
            if code == 200:
                break
            if server.proc is not None and server.proc.poll() is not None:
                pytest.fail(f"the frontend exited:\n{server.log_tail(60)}")
            if time.monotonic() > deadline:
                pytest.fail(f"not ready after 300 s:\n{server.log_tail(60)}")
            time.sleep(1)
        yield base, overlay
    finally:
        server.stop()
        print(f"----- frontend log tail -----\n{server.log_tail(60)}")


def test_models_list_the_served_name(served: tuple[str, openai_frontend.Overlay]) -> None:
    base, _ = served
    code, body = get(f"{base}/v1/models")
    assert code == 200
    ids = {m["id"] for m in json.loads(body)["data"]}
    # upstream lists every Triton model; the served name is the ensemble
    assert ids == {SERVED, "preprocessing", "postprocessing", "tensorrt_llm"}


def test_chat_completion_through_the_openai_client(served: tuple[str, openai_frontend.Overlay]) -> None:
    """The docs' Python example, run with the ``openai`` client in the overlay's interpreter."""
    base, overlay = served
    script = f"""
import json
from openai import OpenAI
client = OpenAI(base_url="{base}/v1", api_key="unused")
reply = client.chat.completions.create(
    model="{SERVED}", messages=[{{"role": "user", "content": "Say hello"}}], max_tokens=8
)
chunks = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
    model="{SERVED}", messages=[{{"role": "user", "content": "Count"}}], max_tokens=6, stream=True
) if c.choices]
print(json.dumps({{"text": reply.choices[0].message.content, "model": reply.model, "chunks": chunks}}))
"""
    python = tritoncpu.runtime() / "venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in overlay.pythonpath)}
    out = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["model"] == SERVED
    assert result["text"].strip(), result  # text came back
    assert "Say hello" not in result["text"] and "assistant:" not in result["text"]  # not the prompt
    assert len([c for c in result["chunks"] if c]) >= 2, result  # streamed as several events


def test_completion_and_echo(served: tuple[str, openai_frontend.Overlay]) -> None:
    base, _ = served
    prompt = "The quick brown fox"
    plain = json.loads(post(f"{base}/v1/completions", {"model": SERVED, "prompt": prompt, "max_tokens": 6}))
    echo = json.loads(
        post(f"{base}/v1/completions", {"model": SERVED, "prompt": prompt, "max_tokens": 6, "echo": True})
    )
    assert plain["choices"][0]["text"].strip() and not plain["choices"][0]["text"].startswith(prompt)
    assert echo["choices"][0]["text"].startswith(prompt)


def test_metrics_on_the_openai_port_feed_the_autoscaler(served: tuple[str, openai_frontend.Overlay]) -> None:
    base, _ = served
    post(f"{base}/v1/completions", {"model": SERVED, "prompt": "Hi", "max_tokens": 2})
    code, text = get(f"{base}/metrics")
    assert code == 200
    assert 'nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting"' in text
    assert "nv_trt_llm_kv_cache_block_metrics" in text
    assert f'nv_inference_count{{model="{SERVED}",version="1"}}' in text
    signals = signals_from_text(text)
    # every autoscaling signal of the registry (api.signals.SIGNALS) is measured from this page
    assert all(value is not None for value in signals.values().values()), signals
