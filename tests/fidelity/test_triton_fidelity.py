"""Every model repository the builder packages and the operator renders, loaded by a real Triton.

A real ``tritonserver`` 2.51 (``nvidia-pytriton==0.7.0``, ``hack/triton-runtime.sh``) serves the
artifact the real engine-builder produced on this CPU, with the CPU stand-in for the TensorRT-LLM
engine (``hack/tritoncpu``, docs/triton-cpu.md) in place of the GPU engine. For each case:

* the repository is laid out by the operator's own rendered ``launch.sh`` (run as a pod runs it,
  with ``mpirun`` for tensor parallelism 2) from the ConfigMap the operator renders
  (``render.model_repository``) — or, for ``builder`` cases, from the files the builder packaged
  in the artifact's ``triton/`` (and its renderer with BLS on);
* every model comes up READY and the server log holds no error line;
* a generate request through the ensemble (BLS / the LLM-API model where that is the entry point)
  returns text; a streaming request returns several responses when the model is decoupled;
* numerics: greedy generation through Triton equals greedy generation of the source model with
  transformers for ``none``; for quantized formats the error of the prompt's logits (``return_context_logits``
  through Triton for the tensorrt backend; the same stand-in loader in-process for the PyTorch
  backend, whose LLM-API model returns no logits) is measured, printed, and held to the documented
  tolerance (FP8 ≤ :data:`FP8_LOGIT_TOLERANCE` × max |logit|; docs/triton-cpu.md records all formats).

The cases are generic over what is rendered: they enumerate the models the renderer returns and
take ``decoupled`` from the rendered ``config.pbtxt`` / ``model.yaml`` themselves.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("modelopt.torch.quantization")

import torch
from support.fidelity import SERVING_ROOT, Built, build, deployment_doc, post

from engine_builder.package import triton_params
from engine_builder.tinymodel import make_tiny_model
from engine_builder.triton import render_trtllm_repository
from trtllm_operator.decide.serving_params import ARTIFACT_MOUNT, serving_params
from trtllm_operator.render.model_repository import desired_model_repository, volume_items

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
import tritoncpu  # noqa: E402

sys.path.insert(0, str(tritoncpu.STANDIN_BACKEND))
import standin_engine  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.quantize]

#: FP8 logits may differ from the source model's by at most this fraction of the largest |logit|
#: (e4m3 keeps 3 mantissa bits: ≈ 6 % relative rounding per weight and activation; measured on
#: the tiny model: 7-8 %, docs/triton-cpu.md).
FP8_LOGIT_TOLERANCE = 0.15
PROMPTS = ["The quick brown fox", "Kubernetes runs containers", "A tiny Llama"]
MAX_TOKENS = 8


@dataclass(frozen=True)
class Case:
    id: str
    backend: str
    fmt: str
    tp: int
    source: str  # "operator": the operator's ConfigMap; "builder": the artifact's triton/; "builder-bls"
    decoupled: bool = False
    #: draft_tokens_external with a second tiny model as the draft (its own engine in the artifact).
    draft: bool = False


CASES = [
    Case("tensorrt-none-tp1-operator", "tensorrt", "none", 1, "operator"),
    Case("tensorrt-fp8-tp2-operator-decoupled", "tensorrt", "fp8", 2, "operator", decoupled=True),
    Case("tensorrt-int8_sq-tp2-bls-decoupled", "tensorrt", "int8_sq", 2, "builder-bls", decoupled=True),
    Case("tensorrt-int4_awq-tp2-builder", "tensorrt", "int4_awq", 2, "builder"),
    Case("tensorrt-w4a8_awq-tp1-bls", "tensorrt", "w4a8_awq", 1, "builder-bls"),
    Case("pytorch-none-operator", "pytorch", "none", 1, "operator"),
    Case("pytorch-fp8-operator-decoupled", "pytorch", "fp8", 1, "operator", decoupled=True),
    Case("pytorch-int4_awq-builder", "pytorch", "int4_awq", 1, "builder"),
    # Draft-target speculative decoding: the repository wired as NVIDIA/TensorRT-LLM
    # examples/draft_target_model/README.md (1.2) wires it — tensorrt_llm_bls naming the draft model
    # tensorrt_llm_draft, a copy of tensorrt_llm loading the draft engine — by the operator and by
    # the builder's package stage.
    Case("tensorrt-none-tp1-draft-operator", "tensorrt", "none", 1, "operator", draft=True),
    Case(
        "tensorrt-fp8-tp2-draft-builder-decoupled",
        "tensorrt",
        "fp8",
        2,
        "builder",
        decoupled=True,
        draft=True,
    ),
]
#: Measured logit errors, printed at the end of the module (docs/triton-cpu.md has a table).
ERRORS: dict[str, float] = {}


@pytest.fixture(scope="module")
def volumes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("volumes")
    make_tiny_model(root / "models" / "tiny-llama")
    # The draft: fewer, narrower layers, the same tokenizer and vocabulary.
    make_tiny_model(
        root / "models" / "tiny-llama-draft", layers=1, hidden_size=64, intermediate_size=128, seed=1
    )
    return root


def repository_files(case: Case, built: Built) -> dict[str, str] | None:
    """The files the case serves: None = the operator's own render; else the builder's."""
    if case.source == "operator":
        return None
    if case.source == "builder":
        triton = built.artifact / "triton"
        return {
            p.relative_to(triton).as_posix(): p.read_text()
            for p in sorted(triton.rglob("*"))
            if p.is_file() and p.suffix in (".pbtxt", ".yaml")
        }
    params = triton_params(built.spec, built.manifest["plan"], ARTIFACT_MOUNT).model_copy(
        # Two BLS instances, not the product's default of the max batch size (16 here; upstream's
        # rule, tests/unit/test_builder_triton.py): each instance is a Python stub process, and
        # sixteen per case cost memory and start time on a 2-core CI machine.
        update={"include_bls": True, "decoupled": case.decoupled, "bls_instance_count": 2}
    )
    files = render_trtllm_repository(params)
    return {k: v for k, v in files.items() if not k.endswith(".gitkeep")}


def declared_decoupled(repo: Path, model: str) -> bool:
    """Whether ``model``'s rendered config declares decoupled; an ensemble streams when its
    ``tensorrt_llm`` step does."""
    text = (repo / ("tensorrt_llm" if model == "ensemble" else model) / "config.pbtxt").read_text()
    return bool(re.search(r"decoupled\s*:\s*true", text))


@dataclass
class Served:
    case: Case
    built: Built
    server: tritoncpu.Server
    repo: Path
    models: list[str]


@pytest.fixture(scope="module", params=CASES, ids=[c.id for c in CASES])
def served(
    request: pytest.FixtureRequest, volumes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    case: Case = request.param
    built = build(volumes, case.backend, case.fmt, case.tp, case.draft)
    deployment = deployment_doc(built.engine, case.decoupled)
    params = serving_params(deployment, built.engine, gpus_per_node=8)
    files = repository_files(case, built)
    configmap = desired_model_repository(params, files)
    work = tmp_path_factory.mktemp(case.id)
    # A loopback address of its own per case and run, as every pod has its own IP: a server left
    # over from elsewhere cannot answer in its place.
    address = f"127.{100 + os.getpid() % 100}.0.{CASES.index(case) + 1}"
    with socket.socket() as probe:
        assert probe.connect_ex((address, 8000)) != 0, f"{address}:8000 is already in use"
    server = tritoncpu.run_launch_script(
        configmap["data"],
        volume_items(configmap),
        built.artifact,
        address=address,
        work_dir=work,
        extra_mounts={SERVING_ROOT: str(built.artifact.parent)},
    )
    try:
        t0 = time.monotonic()
        server.wait_ready(timeout=300)
        print(f"\n[fidelity] {case.id}: ready in {time.monotonic() - t0:.1f} s", flush=True)
        models = sorted({k.split("__", 1)[0] for k in configmap["data"] if "__" in k})
        yield Served(case, built, server, work / "model-repository", models)
    finally:
        server.stop()
        print(f"----- {case.id}: tritonserver log tail -----\n{server.log_tail(60)}")  # shown on failure


def get(url: str, timeout: float = 30) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return dict(json.loads(resp.read()))


def stream(url: str, body: dict[str, Any], timeout: float = 60) -> list[dict[str, Any]]:
    """Triton's ``generate_stream`` (server-sent events): every ``data:`` event, in order."""
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data:"):
                events.append(json.loads(line[len("data:") :]))
    return events


def entry(served: Served) -> tuple[str, dict[str, Any]]:
    """The model a client calls and its generate body for ``PROMPTS[0]``."""
    if served.case.backend == "pytorch":
        return "tensorrt_llm", {
            "text_input": PROMPTS[0],
            "sampling_param_max_tokens": MAX_TOKENS,
            "sampling_param_top_k": 1,
        }
    model = "tensorrt_llm_bls" if "tensorrt_llm_bls" in served.models else "ensemble"
    return model, {"text_input": PROMPTS[0], "max_tokens": MAX_TOKENS, "top_k": 1}


#: Harmless on a CPU-only machine (no CUDA driver): Triton logs it at start (audit §D).
KNOWN_CPU_LINES = (
    "CudaDriverHelper has not been initialized",
    "unable to create stream for ensemble: CUDA driver version is insufficient",
)


def test_every_model_ready_and_no_error_in_the_log(served: Served) -> None:
    for model in served.models:
        with urllib.request.urlopen(f"{served.server.url}/v2/models/{model}/ready", timeout=5) as resp:
            assert resp.status == 200, model
    log = served.server.log_text()
    bad = [
        line
        for line in log.splitlines()
        if (
            re.search(r"(^|\] ?<stderr>:)E\d{4} ", line)
            or "Traceback" in line
            or "failed to load" in line.lower()
        )
        and not any(k in line for k in KNOWN_CPU_LINES)
    ]
    assert not bad, "\n".join(bad[:20])
    assert "CPU stand-in for the TensorRT-LLM engine" in log  # the stand-in says what it is


def test_generate_returns_text(served: Served) -> None:
    model, body = entry(served)
    out = post(f"{served.server.url}/v2/models/{model}/generate", body)
    text = out["text_output"]
    assert isinstance(text, str) and text.strip(), out


def test_streaming_returns_several_responses_when_decoupled(served: Served) -> None:
    model, body = entry(served)
    body = {**body, ("streaming" if served.case.backend == "pytorch" else "stream"): True}
    if served.case.backend == "pytorch":
        # Audit A4: the LLM-API model applies model.yaml's triton_config only in auto_complete_config()
        # (TensorRT-LLM triton_backend/all_models/llmapi/tensorrt_llm/1/model.py), which Triton skips
        # under --disable-auto-complete-config (python_backend src/python_be.cc ModelState::Create):
        # the rendered config.pbtxt must declare what model.yaml asks for, and this server loaded it.
        doc = yaml.safe_load((served.repo / "tensorrt_llm" / "1" / "model.yaml").read_text())
        yaml_decoupled = bool((doc.get("triton_config") or {}).get("decoupled"))
        assert declared_decoupled(served.repo, "tensorrt_llm") == yaml_decoupled == served.case.decoupled
        config = get(f"{served.server.url}/v2/models/tensorrt_llm/config")
        assert bool((config.get("model_transaction_policy") or {}).get("decoupled")) == served.case.decoupled
        assert config.get("max_batch_size", 0) == 0
    if not declared_decoupled(served.repo, model):
        with pytest.raises(urllib.error.HTTPError):
            stream(f"{served.server.url}/v2/models/{model}/generate_stream", body)
        return
    events = stream(f"{served.server.url}/v2/models/{model}/generate_stream", body)
    texts = [e.get("text_output") for e in events if "error" not in e]
    assert len(texts) >= 2, events
    assert not [e for e in events if "error" in e], events


#: Concurrent generate requests of :func:`test_metrics_page_under_load_follows_upstream_relations`:
#: fewer than the engine's ``maxBatchSize`` (16), so the page shows a partly used replica.
LOAD_REQUESTS = 6
LOAD_TOKENS = 96


def _status(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, str]:
    body = b"{}" if method == "POST" else None
    req = urllib.request.Request(url, body, headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def test_admin_apis_refused_without_the_pods_admin_key_inference_and_scrapes_still_open(
    served: Served,
) -> None:
    """Issue 24 item 5: the rendered ``--http-restricted-api`` / ``--grpc-restricted-protocol``
    (render.serving.restricted_api_args) as the real Triton 2.51 enforces them. Without the header
    ``admin-key`` (or with another value) the shared-memory, model-repository, trace and logging APIs
    answer 403 "This API is restricted, expecting header 'admin-key'" (triton-inference-server/server
    r24.10 src/http_server.cc ``RespondIfRestricted``) and their gRPC calls fail; with the pod's value
    (TRITON_ADMIN_KEY, from its Secret) they answer. Health, metadata, model config, statistics,
    the metrics port and inference (test_generate_returns_text) need no header."""
    import tritonclient.grpc as grpcclient  # noqa: PLC0415
    from tritonclient.utils import InferenceServerException  # noqa: PLC0415

    from trtllm_operator.render.serving import ADMIN_HEADER, GRPC_HEADER_PREFIX  # noqa: PLC0415

    server = served.server
    key = server.admin_key
    assert key, "the launch script ran without TRITON_ADMIN_KEY"
    restricted = {
        "model-repository": ("POST", "/v2/repository/index"),
        "logging": ("GET", "/v2/logging"),
        "trace": ("GET", "/v2/trace/setting"),
        "shared-memory": ("GET", "/v2/systemsharedmemory/status"),
    }
    for api, (method, path) in restricted.items():
        for headers in ({}, {ADMIN_HEADER: "not-" + key}):
            code, text = _status(server.url + path, method, headers)
            assert code == 403, (api, headers, code, text)
            assert "This API is restricted, expecting header 'admin-key'" in text, text
        code, text = _status(server.url + path, method, {ADMIN_HEADER: key})
        assert code == 200, (api, code, text)
    model = entry(served)[0]
    for path in (
        "/v2/health/ready",
        "/v2",
        f"/v2/models/{model}",
        f"/v2/models/{model}/config",
        "/v2/models/stats",
    ):
        code, text = _status(server.url + path)
        assert code == 200, (path, code, text)
    with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
        assert resp.status == 200 and b"nv_inference_request_success" in resp.read()

    client = grpcclient.InferenceServerClient(f"{server.address}:{server.grpc_port}")
    try:
        with pytest.raises(InferenceServerException, match="restricted"):
            client.get_model_repository_index()
        with pytest.raises(InferenceServerException, match="restricted"):
            client.get_log_settings(headers={GRPC_HEADER_PREFIX + ADMIN_HEADER: "not-" + key})
        granted = {GRPC_HEADER_PREFIX + ADMIN_HEADER: key}
        assert {m.name for m in client.get_model_repository_index(headers=granted).models} >= {model}
        assert client.get_log_settings(headers=granted) is not None
        assert client.is_server_ready() and client.get_model_metadata(model).name == model
    finally:
        client.close()


#: Set to a path to save the page that test reads (how ``tests/fixtures/triton_metrics_cpu_standin.txt``
#: is captured: docs/triton-cpu.md "Captured exposition").
CAPTURE_ENV = "TRTLLM_CAPTURE_METRICS"
CAPTURE_CASE = "tensorrt-none-tp1-operator"


KV_FAMILY = "nv_trt_llm_kv_cache_block_metrics"


def _request_families(page: str) -> dict[str, dict[str, float]]:
    """``{family: {category: value}}`` of the ``tensorrt_llm`` model's ``nv_trt_llm_*`` gauges, read by
    prometheus-client's parser (independent of the operator's own reader)."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(page):
        for s in fam.samples:
            if s.labels.get("model") != "tensorrt_llm" or not fam.name.startswith("nv_trt_llm_"):
                continue
            category = next(v for k, v in s.labels.items() if k not in ("model", "version"))
            out.setdefault(fam.name, {})[category] = s.value
    return out


def test_metrics_page_under_load_follows_upstream_relations(served: Served) -> None:
    """The real server's ``/metrics`` page while generate requests are in flight.

    Relations (tensorrtllm_backend v0.19.0 ``inflight_batcher_llm/src/model_instance_state.cc``
    ``WaitForStats()``, reference triton-metrics-semantics.md): ``active`` ≤ ``max``;
    ``waiting`` = ``active`` − ``scheduled``; KV blocks ``used`` + ``free`` = ``max`` and
    ``fraction`` = used / max. With ``TRTLLM_CAPTURE_METRICS=<path>`` the page of
    :data:`CAPTURE_CASE` is written there (the captured fixture of the operator's unit tests).
    """
    if served.case.backend != "tensorrt":
        pytest.skip("the LLM-API model exports no nv_trt_llm_* families (the C++ backend does)")
    import threading  # noqa: PLC0415

    model, body = entry(served)
    # Through the ensemble: the BLS model runs one request at a time per instance (its config's
    # instance count; tensorrtllm_backend all_models/inflight_batcher_llm/tensorrt_llm_bls), so it
    # would never put several requests in the engine at once.
    model = "ensemble" if "ensemble" in served.models else model
    body = {**body, "max_tokens": LOAD_TOKENS}
    errors: list[BaseException] = []

    def one() -> None:
        try:
            post(f"{served.server.url}/v2/models/{model}/generate", body, timeout=300)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(LOAD_REQUESTS)]
    for t in threads:
        t.start()
    # The backend sets each gauge on its own (tensorrtllm_backend v0.19.0 custom_metrics_reporter.cc
    # UpdateCustomMetrics → TritonMetricGroup::UpdateGroup, one TRITONSERVER_MetricSet per category),
    # so a scrape during an update reads a torn page: ``active`` already new, ``waiting`` still old (a
    # CI run saw active 6, scheduled 1, waiting 0). Only a settled page, one whose request and KV-block
    # gauges the next scrape repeats value for value, is checked.
    best: tuple[float, str] | None = None
    previous: tuple[dict[str, dict[str, float]], str] | None = None
    while any(t.is_alive() for t in threads):
        with urllib.request.urlopen(served.server.metrics_url, timeout=10) as resp:
            page = resp.read().decode()
        every = _request_families(page)
        fams = {k: every.get(k, {}) for k in ("nv_trt_llm_request_metrics", KV_FAMILY)}
        if previous is not None and previous[0] == fams:
            active = fams.get("nv_trt_llm_request_metrics", {}).get("active", 0.0)
            if best is None or active > best[0]:
                best = (active, previous[1])
        previous = (fams, page)
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert not errors, errors
    assert best is not None and best[0] >= 2, (
        f"no settled page showed ≥ 2 active requests (best {best and best[0]})"
    )
    fams = _request_families(best[1])
    req, kv = fams["nv_trt_llm_request_metrics"], fams["nv_trt_llm_kv_cache_block_metrics"]
    assert 0 < req["active"] <= req["max"], req
    assert req["waiting"] == req["active"] - req["scheduled"], req
    assert kv["used"] + kv["free"] == kv["max"] > 0, kv
    assert kv["fraction"] == pytest.approx(kv["used"] / kv["max"]), kv
    assert kv["used"] > 0, kv
    target = os.environ.get(CAPTURE_ENV)
    if target and served.case.id == CAPTURE_CASE:
        Path(target).write_text(best[1])
        print(f"\n[fidelity] captured {served.case.id}'s page under load to {target}", flush=True)


@pytest.fixture(scope="module")
def source_model(volumes: Path) -> Any:
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    return AutoModelForCausalLM.from_pretrained(volumes / "models" / "tiny-llama", dtype=torch.float32).eval()


def _tokenizer(volumes: Path) -> Any:
    from transformers import AutoTokenizer  # noqa: PLC0415

    return AutoTokenizer.from_pretrained(volumes / "models" / "tiny-llama")


def test_draft_model_served_next_to_the_target(served: Served) -> None:
    """draft_tokens_external: the artifact holds both checkpoints, its manifest lists the draft with
    its own engine key, and the repository serves tensorrt_llm_draft from the draft's checkpoint
    behind a BLS that names it (upstream's tensorrt_llm_draft_model_name)."""
    if not served.case.draft:
        assert "tensorrt_llm_draft" not in served.models
        return
    manifest = served.built.manifest
    draft = manifest["draft"]
    assert draft["engineKey"] != manifest["engineKey"] and draft["tritonModel"] == "tensorrt_llm_draft"
    paths = {f["path"] for f in manifest["files"]}
    tp = served.case.tp
    for rank in range(tp):
        assert f"checkpoint/rank{rank}.safetensors" in paths
        assert f"draft/checkpoint/rank{rank}.safetensors" in paths
    assert manifest["plan"]["draft"]["params_total"] == draft["model"]["params_total"]
    assert {"tensorrt_llm", "tensorrt_llm_draft", "tensorrt_llm_bls"} <= set(served.models)
    bls = (served.repo / "tensorrt_llm_bls" / "config.pbtxt").read_text()
    assert re.search(
        r'key: "tensorrt_llm_draft_model_name" value: \{ string_value: "tensorrt_llm_draft" \}', bls
    )
    draft_cfg = (served.repo / "tensorrt_llm_draft" / "config.pbtxt").read_text()
    assert 'name: "tensorrt_llm_draft"' in draft_cfg
    assert re.search(r'key: "gpt_model_path" value: \{ string_value: "[^"]*/draft/engine" \}', draft_cfg)
    log = served.server.log_text()
    assert re.search(r"Model tensorrt_llm_draft: TensorRT-LLM checkpoint \S*/draft/checkpoint ", log), (
        "the draft model must load the draft checkpoint"
    )
    # The draft engine answers on its own (its tokens come from the draft weights).
    tok_ids = [1, 2, 3]
    out = post(
        f"{served.server.url}/v2/models/tensorrt_llm_draft/generate",
        {"input_ids": tok_ids, "input_lengths": [3], "request_output_len": [4], "runtime_top_k": [1]},
    )
    assert out_len(out) >= 4, out


def test_greedy_equals_transformers_for_none_and_logit_error_for_formats(
    served: Served, source_model: Any, volumes: Path
) -> None:
    tok = _tokenizer(volumes)
    case = served.case
    worst = 0.0
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        with torch.no_grad():
            ref_logits = source_model(torch.tensor([ids])).logits[0]
            ref = source_model.generate(
                torch.tensor([ids]),
                max_new_tokens=MAX_TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )[0][len(ids) :].tolist()
        scale = float(ref_logits.abs().max())
        if case.backend == "tensorrt":
            out = post(
                f"{served.server.url}/v2/models/tensorrt_llm/generate",
                {
                    "input_ids": ids,
                    "input_lengths": [len(ids)],
                    "request_output_len": [MAX_TOKENS],
                    "runtime_top_k": [1],
                    "return_context_logits": [True],
                    "exclude_input_in_output": [True],
                },
            )
            got_tokens = list(map(int, _flatten(out["output_ids"])))[: out_len(out)]
            ctx = torch.tensor(out["context_logits"], dtype=torch.float32).reshape(len(ids), -1)
            err = float((ctx - ref_logits).abs().max())
        else:
            text = post(
                f"{served.server.url}/v2/models/tensorrt_llm/generate",
                {"text_input": prompt, "sampling_param_max_tokens": MAX_TOKENS, "sampling_param_top_k": 1},
            )
            got_tokens = None
            expect_text = tok.decode(ref, skip_special_tokens=True)
            if case.fmt == "none":
                assert text["text_output"] == expect_text, (prompt, text, expect_text)
            weights = standin_engine.load_checkpoint(str(served.built.artifact / "checkpoint"))
            pool = standin_engine.BlockPool(64, 32)
            seq = standin_engine.Sequence(ids)
            seq.blocks = pool.allocate(pool.blocks_for(len(ids)))
            err = float(
                (standin_engine.LlamaRunner(weights, pool).step(seq, all_logits=True) - ref_logits)
                .abs()
                .max()
            )
        worst = max(worst, err / scale)
        if case.fmt == "none" and got_tokens is not None:
            assert got_tokens == ref, (prompt, got_tokens, ref)
    ERRORS[case.id] = worst
    print(f"\n[fidelity] {case.id}: max |Δlogit| / max |logit| = {worst:.4f}", flush=True)
    if case.fmt == "none":
        assert worst < 1e-2, worst
    elif case.fmt == "fp8":
        assert worst <= FP8_LOGIT_TOLERANCE, worst


def _flatten(x: Any) -> list[Any]:
    return [y for v in x for y in _flatten(v)] if isinstance(x, list) else [x]


def out_len(out: dict[str, Any]) -> int:
    return int(_flatten(out["sequence_length"])[0])
