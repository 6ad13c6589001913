"""What every serving child is rendered from: names, labels, ports, Triton's arguments. Pure.

Every ``desired_*`` renderer in this package is a pure function of one settled
:class:`~trtllm_operator.decide.serving_params.ServingParams` (no client, no clock): the same
parameters always give the same manifests, byte for byte, so the handler can compare and patch,
and ``trtllm-operator render`` can show a GitOps reviewer exactly what the operator will create.
Whether and how a deployment is served is decided before (:mod:`trtllm_operator.decide.serving`).

Names are deterministic — every child is called after its ``LLMDeployment``, so a retry or a
restarted operator finds the child it created instead of making a second one; the model-repository
ConfigMap also carries a hash of its contents (it is immutable, so a pod that restarts mid-rollout
still reads the files its ReplicaSet was rendered with).

The pods' main processes (the launch scripts) are rendered by :mod:`trtllm_operator.render.launch`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from trtllm_operator.api.wire import (
    COMPONENT_SERVER,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    MANAGED_BY,
)
from trtllm_operator.decide.serving_params import ARTIFACT_TOKENIZER_DIR, ServingParams
from trtllm_operator.decide.triton_config import TRTLLM_SERVE_OPTIONS, llm_api_parallelism

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002
#: Triton's OpenAI-compatible frontend's port: its ``--openai-port`` default (triton-inference-server/
#: server r26.03 ``python/openai/openai_frontend/main.py``). The frontend serves ``/v1/...``,
#: ``/health/ready`` and ``/metrics`` on it (``frontend/fastapi/routers/observability.py``).
OPENAI_PORT = 9000
#: Where the 26.03 images carry the frontend: ``build.py`` (r26.03) copies ``python/openai`` into the
#: install tree (``cpdir(<repo>/python/openai, <install>/python)``) that the image's production stage
#: copies to ``/opt/tritonserver`` (``COPY build/install tritonserver``), pip-installs the
#: ``tritonserver``/``tritonfrontend`` wheels from ``/opt/tritonserver/python`` and
#: ``python/openai/requirements.txt`` (``create_dockerfile_linux``).
OPENAI_FRONTEND_MAIN = "/opt/tritonserver/python/openai/openai_frontend/main.py"

#: ``(name, port)`` of the serving container per ``spec.server.api``. ``openai``: the frontend alone
#: (it starts no KServe frontend and no metrics port: ``main.py`` starts ``tritonserver.Server``
#: in-process and only ``KServeHttp``/``KServeGrpc`` behind ``--enable-kserve-frontends``; metrics are
#: ``GET /metrics`` on the OpenAI port). ``both``: the frontend plus KServe HTTP and gRPC.
API_PORTS: dict[str, tuple[tuple[str, int], ...]] = {
    "triton": (("http", HTTP_PORT), ("grpc", GRPC_PORT), ("metrics", METRICS_PORT)),
    "openai": (("openai", OPENAI_PORT),),
    "both": (("openai", OPENAI_PORT), ("http", HTTP_PORT), ("grpc", GRPC_PORT)),
}


def serving_ports(params: ServingParams) -> tuple[tuple[str, int], ...]:
    """``(name, port)`` the serving container listens on (and the Service exposes)."""
    return API_PORTS[params.server.api]


def client_ports(params: ServingParams) -> tuple[tuple[str, int], ...]:
    """The ports clients use: :func:`serving_ports` without Triton's metrics port (8002). The Service
    exposes only these (it may be a NodePort or LoadBalancer); metrics are scraped from each pod
    directly (the autoscaler, the tuning advisor, the chart's PodMonitor select pods, not the
    Service: a Service would hand each scrape to a different pod). With the OpenAI frontend the
    metrics share the client port 9000 (``GET /metrics``; docs/security.md)."""
    return tuple((name, port) for name, port in serving_ports(params) if port != METRICS_PORT)


def uses_openai_frontend(api: str) -> bool:
    """Whether ``spec.server.api`` serves the OpenAI API (Triton's frontend or ``trtllm-serve``)."""
    return api in ("openai", "both")


def uses_trtllm_serve(params: ServingParams) -> bool:
    """The pytorch backend's OpenAI API is TensorRT-LLM's own server, ``trtllm-serve``
    (:func:`trtllm_serve_args`); the tensorrt backend's is Triton's frontend
    (:func:`openai_frontend_args`)."""
    return serves_with_trtllm_serve(params.backend, params.server.api)


def serves_with_trtllm_serve(backend: str, api: str) -> bool:
    """:func:`uses_trtllm_serve` from the engine's ``spec.backend`` and the deployment's
    ``spec.server.api`` alone (``trtllm-operator simulate --deployment`` has no ServingParams)."""
    return backend == "pytorch" and api == "openai"


def metrics_port(api: str) -> int:
    """Where a serving pod's Prometheus metrics are (path ``/metrics`` on both): Triton's metrics port
    for ``api: triton``, the OpenAI frontend's port otherwise (same Triton core, same families).
    ``trtllm-serve`` (pytorch backend) serves its own families elsewhere:
    :data:`TRTLLM_SERVE_METRICS_PATH`."""
    return OPENAI_PORT if uses_openai_frontend(api) else METRICS_PORT


#: Where the operator's files are mounted inside the Triton container (the artifact's mount is
#: :data:`trtllm_operator.decide.serving_params.ARTIFACT_MOUNT`).
CONFIG_MOUNT = "/etc/trtllm-operator"
MODEL_REPOSITORY = "/model-repository"
LAUNCH_SCRIPT = "launch.sh"
#: The model code the Triton TRT-LLM image ships (BE@v0.19.0 README:
#: ``/app/all_models/inflight_batcher_llm``; LLM-API model under ``llmapi``): each model's ``1/``
#: comes from here unless the artifact carries its own (:mod:`trtllm_operator.render.launch`).
IMAGE_TEMPLATES = {
    "tensorrt": "/app/all_models/inflight_batcher_llm",
    "pytorch": "/app/all_models/llmapi",
}

_NAME_OK = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def child_name(name: str, suffix: str = "", limit: int = 63) -> str:
    """``<name>[-<suffix>]`` as a DNS-1035 label of at most ``limit`` characters.

    Over-long names keep a readable prefix and end in 8 hex digits of the full name's sha256, so two
    long names never collide on the same truncated prefix.
    """
    full = f"{name}-{suffix}" if suffix else name
    if len(full) <= limit and _NAME_OK.match(full):
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    prefix = re.sub(r"[^a-z0-9-]", "-", full.lower())[: limit - 9].strip("-")
    return f"{prefix}-{digest}"


def selector_labels(params: ServingParams) -> dict[str, str]:
    """The workload selector (also ``status.selector`` for the scale subresource)."""
    return {LABEL_DEPLOYMENT: child_name(params.name)}


def selector_string(params: ServingParams) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(params).items()))


def common_labels(params: ServingParams) -> dict[str, str]:
    return {
        LABEL_NAME: "triton",
        LABEL_INSTANCE: child_name(params.name),
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_COMPONENT: COMPONENT_SERVER,
        **selector_labels(params),
    }


def metadata(params: ServingParams, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": params.namespace,
        "labels": dict(labels if labels is not None else common_labels(params)),
        "ownerReferences": [params.owner.manifest()],
    }


def content_hash(data: Any) -> str:
    """sha256 hex of the canonical JSON of ``data`` (sorted keys, no whitespace)."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


#: Environment variable of the serving container holding the admin header value (the
#: ``triton-admin-key`` of the Secret ``<name>-credentials``, :mod:`trtllm_operator.render.credentials`).
ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"
#: The request header Triton checks for the restricted APIs (``<restricted-key>`` of
#: ``--http-restricted-api``; on gRPC Triton prefixes it: ``triton-grpc-protocol-admin-key``,
#: triton-inference-server/server r24.10 ``src/grpc/grpc_server.h`` ``kRestrictedProtocolHeaderTemplate``).
ADMIN_HEADER = "admin-key"
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"
#: Triton's API categories behind the admin header: what no client, probe, autoscaler or dashboard
#: of this product calls, and what can change or read the server's state beyond inference —
#: registering system/CUDA shared-memory regions (``shared-memory``), listing, loading and unloading
#: models (``model-repository``), changing trace settings and trace files (``trace``), changing log
#: settings (``logging``). Left open: ``health`` (the kubelet's probes), ``metadata`` and
#: ``model-config`` (client libraries read them before a request: tritonclient, perf_analyzer,
#: genai-perf), ``inference``, ``statistics`` (perf_analyzer's server-side report). Category names:
#: triton-inference-server/server r24.10 (2.51) ``src/restricted_features.h``
#: ``RESTRICTED_CATEGORY_NAMES``; docs/customization_guide/inference_protocols.md "Limit Endpoint
#: Access". The metrics port (8002) is not one of these categories: it is separated by the Service
#: and the NetworkPolicy instead (docs/security.md).
RESTRICTED_APIS = ("shared-memory", "model-repository", "trace", "logging")
#: ``tritonserver`` flag for the TTFT histogram (``--metrics-config <setting>=<value>``, Triton
#: docs/user_guide/metrics.md "Histograms"); see :func:`tritonserver_args`.
TTFT_METRICS_CONFIG = "--metrics-config=histogram_latencies=true"


def tritonserver_args(params: ServingParams, *, leader: bool, rank: int) -> list[str]:
    """One ``tritonserver`` rank's arguments, as TensorRT-LLM's launch script builds them (§4.4).

    Rank 0 serves every model and the three ports; ranks ≥ 1 load only ``tensorrt_llm`` in explicit
    model-control mode and never return from model initialisation, so the shared ports never clash.
    Each rank gets its own Python-backend shared-memory prefix.

    :data:`TTFT_METRICS_CONFIG` turns on Triton's time-to-first-response histogram
    (``nv_inference_first_response_histogram_ms``, decoupled models only), which the dashboard's
    TTFT panels read: triton-inference-server/core r24.11 (Triton 2.52) ``src/metric_model_reporter.cc``
    ``MetricReporterConfig::ParseConfig`` / ``InitializeHistograms``. Older cores skip settings they
    do not know (the same loop without that key): Triton 2.51 starts and serves with it unchanged.
    """
    args = [
        "tritonserver",
        f"--model-repository={MODEL_REPOSITORY}",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        TTFT_METRICS_CONFIG,
        "--disable-auto-complete-config",
        f"--backend-config=python,shm-region-prefix-name=prefix{rank}_",
        *restricted_api_args(),
    ]
    if not leader:
        args[5:5] = ["--model-control-mode=explicit", "--load-model=tensorrt_llm"]
    return args


def restricted_api_args() -> list[str]:
    """``--http-restricted-api`` and ``--grpc-restricted-protocol`` for :data:`RESTRICTED_APIS`
    behind the header :data:`ADMIN_HEADER` = ``$TRITON_ADMIN_KEY`` (expanded by the launch script
    from the pod's environment: the value is in no manifest).

    Format ``<api>[,<api>...]:<key>=<value>`` for both (triton-inference-server/server r24.10 = v2.51.0
    ``src/command_line_parser.cc``: ``OPTION_HTTP_RESTRICTED_API`` "http-restricted-api" and
    ``OPTION_GRPC_RESTRICTED_PROTOCOL`` "grpc-restricted-protocol" → ``ParseRestrictedFeatureOption``;
    an unknown category stops the server at start). A request without the header, or with another
    value, gets HTTP 403 "This API is restricted, expecting header 'admin-key'"
    (``src/http_server.cc`` ``RespondIfRestricted``); over gRPC the header is
    ``triton-grpc-protocol-admin-key``. Each word is double-quoted for the shell (``_rendered`` keeps
    it so) so that ``$TRITON_ADMIN_KEY`` expands.
    """
    apis = ",".join(RESTRICTED_APIS)
    value = f"{apis}:{ADMIN_HEADER}=${{{ADMIN_KEY_ENV}}}"
    return [f'"--http-restricted-api={value}"', f'"--grpc-restricted-protocol={value}"']


def openai_frontend_args(params: ServingParams) -> list[str]:
    """Triton's OpenAI-compatible frontend over the rendered model repository (``api: openai``/``both``).

    Every flag is ``python/openai/openai_frontend/main.py`` ``parse_args`` of triton-inference-server/
    server r26.03: ``--model-repository`` (required), ``--tokenizer`` (a local folder: the artifact's
    Hugging Face tokenizer, whose ``tokenizer_config.json`` carries the chat template the frontend
    applies, ``engine/triton_engine.py`` ``chat``: ``tokenizer.apply_chat_template``),
    ``--openai-port``, ``--default-max-tokens``, ``--enable-kserve-frontends`` with
    ``--kserve-http-port``/``--kserve-grpc-port``. The frontend starts Triton in-process
    (``tritonserver.Server(...).start(wait_until_ready=True)``) before it opens its port.
    """
    args = [
        "python3",
        OPENAI_FRONTEND_MAIN,
        f"--model-repository={MODEL_REPOSITORY}",
        f"--tokenizer={ARTIFACT_TOKENIZER_DIR}",
        f"--openai-port={OPENAI_PORT}",
    ]
    if params.server.default_max_tokens is not None:
        args.append(f"--default-max-tokens={params.server.default_max_tokens}")
    if params.server.api == "both":
        args += [
            "--enable-kserve-frontends",
            f"--kserve-http-port={HTTP_PORT}",
            f"--kserve-grpc-port={GRPC_PORT}",
        ]
    return args


#: TensorRT-LLM's OpenAI server, the pytorch backend's ``api: openai`` (the ``trtllm-serve`` console
#: script of the ``tensorrt_llm`` wheel the ``-trtllm-python-py3`` images carry;
#: ``tensorrt_llm/commands/serve.py``).
TRTLLM_SERVE = "trtllm-serve"
#: trtllm-serve's routes (``tensorrt_llm/serve/openai_server.py`` ``register_routes``, every stored
#: version from the 1.1 line to the 1.3 line): ``GET /health`` (200 once the ``LLM`` is built, 503
#: when the executor reports unhealthy), ``GET /metrics`` (per-iteration stats as **JSON**, each read
#: drains the queue; pytorch backend only with ``enable_iter_perf_stats``), and, with the LLM
#: argument ``return_perf_metrics``, Prometheus text at ``/prometheus/metrics`` (``mount_metrics``).
TRTLLM_SERVE_HEALTH_PATH = "/health"
TRTLLM_SERVE_METRICS_PATH = "/prometheus/metrics"
#: Where the pod links the checkpoint under the served model name (see :func:`trtllm_serve_args`).
TRTLLM_SERVE_MODEL_DIR = "/tmp/trtllm-serve"


def trtllm_serve_model_name(params: ServingParams) -> str:
    """The ``model`` clients send to ``trtllm-serve``: ``spec.server.openai.servedModelName``, default
    the LLMDeployment's name."""
    return params.server.served_model_name or params.name


def trtllm_serve_args(params: ServingParams) -> list[str]:
    """``trtllm-serve`` for the pytorch backend's ``api: openai``.

    Every flag is an option of ``serve`` in NVIDIA/TensorRT-LLM ``tensorrt_llm/commands/serve.py``,
    declared with the same spelling in the stored versions before the 1.2 line (commit 4c05a748,
    1.1 line) and after it (commit 00209af1, 1.3 line); tests/unit/test_render_trtllm_serve.py checks
    each against those option lists. The 26.03 images carry TensorRT-LLM 1.2.0
    (:mod:`trtllm_operator.decide.image_catalog`).

    - ``MODEL``: the artifact's checkpoint behind a link named after the served model name:
      trtllm-serve 1.2 has no ``--served_model_name`` (added on main in NVIDIA/TensorRT-LLM PR
      #11711, 2026-02), and names a local model directory by its last path component
      (``openai_server.py``: ``self.model = model_dir.name``), which ``/v1/models`` lists and
      requests must name;
    - ``--host 0.0.0.0`` (default ``localhost``) and ``--port`` :data:`OPENAI_PORT`;
    - ``--backend pytorch``, ``--tokenizer`` (the artifact's tokenizer: its ``tokenizer_config.json``
      chat template is the one ``/v1/chat/completions`` applies);
    - ``--tp_size``, ``--pp_size``, ``--ep_size`` (only above 1: unset is TensorRT-LLM's own
      mapping, :func:`~trtllm_operator.decide.triton_config.llm_api_parallelism`); trtllm-serve
      starts the ranks of one node itself (its MPI session);
    - ``--max_batch_size``, ``--max_num_tokens``, ``--max_seq_len`` (the engine's limits);
    - ``--kv_cache_free_gpu_memory_fraction``;
    - ``--extra_llm_api_options`` :data:`TRTLLM_SERVE_OPTIONS`: KV-cache, scheduler and chunked
      prefill settings and ``return_perf_metrics`` (the Prometheus endpoint).
    """
    tensor, pipeline, expert = llm_api_parallelism(
        params.tensor_parallelism, params.pipeline_parallelism, params.expert_parallelism
    )
    args = [
        TRTLLM_SERVE,
        f"{TRTLLM_SERVE_MODEL_DIR}/{trtllm_serve_model_name(params)}",
        "--host",
        "0.0.0.0",  # every address of the pod: the Service, the probes and the NetworkPolicy reach it
        "--port",
        str(OPENAI_PORT),
        "--backend",
        "pytorch",
        "--tokenizer",
        ARTIFACT_TOKENIZER_DIR,
        "--tp_size",
        str(tensor),
        "--pp_size",
        str(pipeline),
    ]
    if expert is not None:
        args += ["--ep_size", str(expert)]
    args += ["--max_batch_size", str(params.max_batch_size)]
    if params.max_num_tokens is not None:
        args += ["--max_num_tokens", str(params.max_num_tokens)]
    if params.max_seq_len is not None:
        args += ["--max_seq_len", str(params.max_seq_len)]
    args += [
        "--kv_cache_free_gpu_memory_fraction",
        str(params.server.kv_cache_free_gpu_mem_fraction),
        "--extra_llm_api_options",
        f"{CONFIG_MOUNT}/model-repository/{TRTLLM_SERVE_OPTIONS}",
    ]
    return args
