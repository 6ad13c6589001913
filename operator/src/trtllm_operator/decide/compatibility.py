"""May this deployment serve this engine, and in which workload? Pure decisions, no I/O.

An engine only loads where it was built: same TensorRT-LLM / TensorRT build (the runtime image)
and same GPU architecture (docs/reference/tensorrt-llm.md §3.3: "The engine plan file is generated
on an incompatible device, expecting compute 9.0 got compute 8.9"; "Version tag does not match").
NVIDIA's safe rule is "same GPU SKU", so the product must match, not only the SM version. Checking
before rollout turns a crash-looping GPU pod into a condition that names both values.

A server image may differ from the engine's runtime image when the user declares it compatible
(e.g. a rebuilt image with the same TensorRT-LLM wheel, or a digest-pinned copy in a private
registry): the annotation ``llm.trtllm-operator.dev/compatible-runtime-images``
(:data:`~trtllm_operator.api.wire.ANNOTATION_COMPATIBLE_IMAGES`) on the LLMDeployment lists the
engine runtime images the server image can load, comma-separated. The user takes responsibility.

A partial artifact (no compiled engine: ``engine-builder run --skip-compile`` imported with
``cache import --allow-partial``; a real Triton cannot load it) is refused unless the LLMDeployment
opts in with ``llm.trtllm-operator.dev/allow-partial-artifact: "true"``
(:data:`~trtllm_operator.api.wire.ANNOTATION_ALLOW_PARTIAL_ARTIFACT`, simulated clusters and tests
only; :func:`partial_artifact_refusal`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine_builder.planner import PlanInputError, lookup
from trtllm_operator.api.wire import (
    ANNOTATION_ALLOW_PARTIAL_ARTIFACT,
    ANNOTATION_COMPATIBLE_IMAGES,
    GPU_PRODUCT_LABEL,
    LWS_CRD_NAME,
)

#: The condition reason (Ready/Progressing/Degraded) of a refused partial artifact.
REASON_PARTIAL_ARTIFACT = "PartialArtifact"


def partial_artifact_refusal(
    engine_name: str, artifact: Mapping[str, Any] | None, annotations: Mapping[str, str] | None
) -> tuple[str, str] | None:
    """``(reason, message)`` when the engine's artifact is partial and the deployment did not opt in
    with :data:`~trtllm_operator.api.wire.ANNOTATION_ALLOW_PARTIAL_ARTIFACT` ``"true"``; None when it
    may be rolled out.

    ``artifact``: the LLMEngine's ``status.artifact`` (``partial``, ``missing``).
    """
    if not artifact or not artifact.get("partial"):
        return None
    if str((annotations or {}).get(ANNOTATION_ALLOW_PARTIAL_ARTIFACT, "")).strip().lower() == "true":
        return None
    missing = "; ".join(str(m) for m in artifact.get("missing") or ()) or "compile skipped"
    return (
        REASON_PARTIAL_ARTIFACT,
        f"LLMEngine {engine_name!r} has a partial artifact (missing {missing}): Triton cannot load it, "
        "nothing was rolled out. Build the engine with the TensorRT-LLM toolchain, or (simulated "
        f'clusters and tests only) annotate this LLMDeployment {ANNOTATION_ALLOW_PARTIAL_ARTIFACT}: "true"',
    )


@dataclass(frozen=True)
class Incompatibility:
    """One mismatch: ``field`` is the LLMDeployment path the user can change."""

    field: str
    deployment_value: str
    engine_value: str

    def message(self) -> str:
        return f"{self.field} is {self.deployment_value!r} but the engine was built for {self.engine_value!r}"


def normalize_image(ref: str) -> str:
    """Canonical image reference: ``docker.io/library/`` dropped, ``:latest`` made explicit.

    ``nginx`` == ``docker.io/library/nginx:latest``; a digest reference is kept as written.
    """
    ref = ref.strip()
    for prefix in ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    if ref.startswith("library/"):
        ref = ref[len("library/") :]
    last = ref.rsplit("/", 1)[-1]
    if "@" not in ref and ":" not in last:
        ref += ":latest"
    return ref


def parse_compatible_images(annotation: str | None) -> frozenset[str]:
    """The annotation's comma-separated images, normalised (empty entries ignored)."""
    if not annotation:
        return frozenset()
    return frozenset(normalize_image(p) for p in annotation.split(",") if p.strip())


def check_compatibility(
    *,
    server_image: str,
    engine_runtime_image: str,
    engine_gpu_product: str,
    deployment_gpu_product: str | None = None,
    engine_sm: int | None = None,
    deployment_sm: int | None = None,
    compatible_images: Collection[str] = (),
) -> list[Incompatibility]:
    """Every reason the engine cannot be served as requested; empty when it can.

    ``deployment_gpu_product`` is the product the deployment pins (``spec.server.gpuProduct`` or a
    ``nvidia.com/gpu.product`` node selector), ``None`` to follow the engine. SM versions, when both
    are known from the GPU catalog, are reported alongside the product.
    """
    problems: list[Incompatibility] = []
    server, engine = normalize_image(server_image), normalize_image(engine_runtime_image)
    if server != engine and engine not in {normalize_image(i) for i in compatible_images}:
        problems.append(Incompatibility("spec.server.image", server_image, engine_runtime_image))
    if deployment_gpu_product and deployment_gpu_product != engine_gpu_product:
        dep, eng = deployment_gpu_product, engine_gpu_product
        if deployment_sm is not None and engine_sm is not None:
            dep, eng = f"{dep} (SM {deployment_sm})", f"{eng} (SM {engine_sm})"
        problems.append(Incompatibility("gpu product", dep, eng))
    return problems


WorkloadKind = Literal["Deployment", "LeaderWorkerSet"]


@dataclass(frozen=True)
class Placement:
    """Which workload serves a replica; ``blocked`` carries a reason when none can."""

    kind: WorkloadKind
    nodes_per_replica: int
    blocked: str | None = None


def decide_placement(world_size: int, gpus_per_node: int, *, lws_installed: bool) -> Placement:
    """Deployment when ``world_size ≤ gpus_per_node``, else a LeaderWorkerSet of
    ``ceil(world_size / gpus_per_node)`` pods — blocked with a reason when the LWS CRD is absent or
    the ranks do not split evenly over the nodes (MPI needs the same slots on every host).
    """
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be ≥ 1, got {gpus_per_node}")
    if world_size <= gpus_per_node:
        return Placement("Deployment", 1)
    nodes = -(-world_size // gpus_per_node)
    if world_size % gpus_per_node:
        return Placement(
            "LeaderWorkerSet",
            nodes,
            blocked=f"{world_size} ranks do not split evenly over nodes of {gpus_per_node} GPUs; "
            "choose tensor × pipeline parallelism that is a multiple of the GPUs per node",
        )
    if not lws_installed:
        return Placement(
            "LeaderWorkerSet",
            nodes,
            blocked=f"one replica needs {world_size} GPUs on {nodes} nodes of {gpus_per_node} GPUs: install "
            f"LeaderWorkerSet (CRD {LWS_CRD_NAME}, https://github.com/"
            "kubernetes-sigs/lws) or lower tensor × pipeline parallelism to fit one node",
        )
    return Placement("LeaderWorkerSet", nodes)


def _catalog(product: str | None) -> tuple[str | None, int | None]:
    """``(canonical product, SM)`` from the GPU catalog; the product as given when unknown."""
    if not product:
        return None, None
    try:
        gpu = lookup(product)
    except PlanInputError:
        return product, None
    return gpu.product, gpu.sm


def gpu_product_aliases(product: str) -> tuple[str, ...]:
    """Node-label spellings of ``product`` besides itself (the catalog's canonical name)."""
    canonical, _ = _catalog(product)
    return (canonical,) if canonical and canonical != product else ()


def engine_incompatibilities(
    deployment: Mapping[str, Any], engine: Mapping[str, Any]
) -> list[Incompatibility]:
    """The compatibility gate for raw objects (image vs ``spec.runtime.image``, GPU product/SM).

    The deployment pins a product only through ``spec.scheduling.nodeSelector["nvidia.com/gpu.product"]``;
    compatible images are declared with the annotation :data:`ANNOTATION_COMPATIBLE_IMAGES`.
    """
    dspec, espec = deployment.get("spec") or {}, engine.get("spec") or {}
    engine_image = (espec.get("runtime") or {}).get("image", "")
    server_image = (dspec.get("server") or {}).get("image") or engine_image
    engine_product = (espec.get("gpu") or {}).get("product", "")
    node_selector = (dspec.get("scheduling") or {}).get("nodeSelector") or {}
    dep_product = node_selector.get(GPU_PRODUCT_LABEL)
    annotations = (deployment.get("metadata") or {}).get("annotations") or {}
    engine_canonical, engine_sm = _catalog(engine_product)
    dep_canonical, dep_sm = _catalog(dep_product)
    return check_compatibility(
        server_image=server_image,
        engine_runtime_image=engine_image,
        engine_gpu_product=engine_canonical or engine_product,
        deployment_gpu_product=dep_canonical,
        engine_sm=engine_sm,
        deployment_sm=dep_sm,
        compatible_images=parse_compatible_images(annotations.get(ANNOTATION_COMPATIBLE_IMAGES)),
    )
