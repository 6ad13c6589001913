"""The InferencePool of a deployment (``spec.routing.inferencePool``): Gateway API Inference Extension.

``inference.networking.k8s.io/v1`` InferencePool, the extension's stable API
(kubernetes-sigs/gateway-api-inference-extension v1.6.0
``config/crd/bases/inference.networking.k8s.io_inferencepools.yaml``; vendored for the tests under
``tests/fixtures/upstream/gateway-api-inference-extension-v1.6.0/``):

- ``selector.matchLabels``: the deployment's replica selector — the same pods the Service selects
  (one-node replicas: every pod; the selector is a label map, as the CRD requires);
- ``targetPorts``: the OpenAI frontend's port (9000). The endpoint picker scrapes each pod's metrics
  at ``targetPorts[0]`` + ``/metrics`` unless told otherwise (v1.5.0 ``pkg/epp/server/options.go``:
  ``--model-server-metrics-port`` "Set to the InferencePool.Spec.TargetPorts[0].Number if not
  defined", path default ``/metrics``; ``pkg/epp/datastore/datastore.go``), which is where the
  frontend serves Triton's metrics;
- ``endpointPickerRef``: the user's endpoint picker Service (kind Service, port, failureMode), when
  given. Which metric names the picker reads is chosen per pod by the label
  :data:`~trtllm_operator.api.wire.ENGINE_TYPE_LABEL` = ``triton-tensorrt-llm``, which the serving
  pods carry while the pool is enabled (:func:`trtllm_operator.render.deployment.pod_labels`).
"""

from __future__ import annotations

from typing import Any

from trtllm_operator.api.wire import INFERENCE_POOL_API_VERSION, INFERENCE_POOL_KIND
from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.leaderworkerset import replica_selector
from trtllm_operator.render.serving import OPENAI_PORT, child_name, metadata


def desired_inference_pool(params: ServingParams) -> dict[str, Any] | None:
    """The InferencePool ``<name>``, or ``None`` when ``spec.routing.inferencePool`` is off.

    Errors: ``ValueError`` when the deployment does not serve the OpenAI API (admission refuses
    that combination; this guards the renderer).
    """
    pool = params.inference_pool
    if pool is None:
        return None
    if params.server.api == "triton":
        raise ValueError("routing.inferencePool needs server.api openai or both")
    spec: dict[str, Any] = {
        "selector": {"matchLabels": replica_selector(params)},
        "targetPorts": [{"number": OPENAI_PORT}],
    }
    if pool.picker_service:
        spec["endpointPickerRef"] = {
            "kind": "Service",
            "name": pool.picker_service,
            "port": {"number": pool.picker_port},
            "failureMode": pool.failure_mode,
        }
    return {
        "apiVersion": INFERENCE_POOL_API_VERSION,
        "kind": INFERENCE_POOL_KIND,
        "metadata": metadata(params, child_name(params.name)),
        "spec": spec,
    }
