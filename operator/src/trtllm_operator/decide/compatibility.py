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

from engine_builder.contract import RUNTIME_LIBRARIES, runtime_versions, same_release
from engine_builder.planner import PlanInputError, lookup
from trtllm_operator.api.wire import (
    ANNOTATION_ALLOW_PARTIAL_ARTIFACT,
    ANNOTATION_COMPATIBLE_IMAGES,
    GPU_PRODUCT_LABEL,
    LWS_CRD_NAME,
)
from trtllm_operator.decide.image_catalog import image_versions

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
    """One mismatch: ``field`` is the LLMDeployment path the user can change, ``fix`` what to do."""

    field: str
    deployment_value: str
    engine_value: str
    fix: str = ""

    def message(self) -> str:
        text = f"{self.field} is {self.deployment_value!r} but the engine was built for {self.engine_value!r}"
        return f"{text}; {self.fix}" if self.fix else text


#: Where a deployment pins the GPU product (the node label GPU Feature Discovery writes).
NODE_SELECTOR_PRODUCT_FIELD = 'spec.scheduling.nodeSelector["nvidia.com/gpu.product"]'
_REQUIRED_TERMS_FIELD = "spec.scheduling.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def affinity_incompatibility(
    affinity: Mapping[str, Any] | None, products: Collection[str], label: str
) -> Incompatibility | None:
    """An :class:`Incompatibility` when no required node selector term of ``affinity`` can match a
    node of the engine's GPU: the operator adds ``label In products`` to every term (terms are ORed,
    requirements within a term ANDed; core/v1 NodeSelector semantics), so a term whose own ``label``
    requirement (``In`` without any of ``products``, ``NotIn`` all of them, ``DoesNotExist``) excludes
    them all never matches, and with every term dead the pods never schedule. ``None`` otherwise.
    """
    required = ((affinity or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms = (required or {}).get("nodeSelectorTerms") or []
    wanted = set(products)
    dead: list[str] = []
    for i, term in enumerate(terms):
        for j, req in enumerate(term.get("matchExpressions") or []):
            if req.get("key") != label:
                continue
            values, op = set(req.get("values") or ()), req.get("operator")
            if (
                (op == "In" and not values & wanted)
                or (op == "NotIn" and wanted <= values)
                or op == "DoesNotExist"
            ):
                dead.append(f"nodeSelectorTerms[{i}].matchExpressions[{j}] ({op} {sorted(values)})")
                break
    if not terms or len(dead) < len(terms):
        return None
    return Incompatibility(
        f"{_REQUIRED_TERMS_FIELD}.{dead[0]}" if len(dead) == 1 else _REQUIRED_TERMS_FIELD,
        ", ".join(dead),
        " or ".join(sorted(wanted)),
        f"no required node selector term admits a {label} of the engine, so the pods could never be "
        f"scheduled (the operator adds {label} In {sorted(wanted)} to every term); allow the engine's "
        "product in the term or remove the requirement",
    )


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
    engine_gpu_products: Collection[str] = (),
) -> list[Incompatibility]:
    """Every reason the engine cannot be served as requested; empty when it can.

    ``deployment_gpu_product`` is the product the deployment pins (its
    ``spec.scheduling.nodeSelector["nvidia.com/gpu.product"]``), ``None`` to follow the engine;
    ``engine_gpu_products`` are the node-label values the pods require (the engine's product and its
    catalog aliases; default: ``engine_gpu_product``): a pinned product outside them can never be
    scheduled, since the node selector and the operator's required affinity must both match. SM
    versions, when both are known from the GPU catalog, are reported alongside the product.
    """
    problems: list[Incompatibility] = []
    server, engine = normalize_image(server_image), normalize_image(engine_runtime_image)
    if server != engine and engine not in {normalize_image(i) for i in compatible_images}:
        problems.append(
            Incompatibility(
                "spec.server.image",
                server_image,
                engine_runtime_image,
                "remove spec.server.image to serve with the engine's runtime image, or, if this image "
                f"carries the same TensorRT-LLM build, list the engine's image in the annotation "
                f"{ANNOTATION_COMPATIBLE_IMAGES}",
            )
        )
    allowed = set(engine_gpu_products or (engine_gpu_product,))
    if deployment_gpu_product and deployment_gpu_product not in allowed:
        dep, eng = deployment_gpu_product, engine_gpu_product
        if deployment_sm is not None and engine_sm is not None:
            dep, eng = f"{dep} (SM {deployment_sm})", f"{eng} (SM {engine_sm})"
        problems.append(
            Incompatibility(
                NODE_SELECTOR_PRODUCT_FIELD,
                dep,
                eng,
                "the pods always require the engine's gpu.product, so no node matches both: remove the "
                "key from spec.scheduling.nodeSelector, or serve an LLMEngine built for that GPU",
            )
        )
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
    of_gpus = f"{gpus_per_node} {'GPU' if gpus_per_node == 1 else 'GPUs'}"  # trial 47 U12
    if world_size % gpus_per_node:
        return Placement(
            "LeaderWorkerSet",
            nodes,
            blocked=f"{world_size} ranks do not split evenly over nodes of {of_gpus}; "
            "choose tensor × pipeline parallelism that is a multiple of the GPUs per node",
        )
    if not lws_installed:
        return Placement(
            "LeaderWorkerSet",
            nodes,
            blocked=f"one replica needs {world_size} GPUs on {nodes} nodes of {of_gpus}: install "
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


@dataclass(frozen=True)
class NodeGPUs:
    """GPUs in one node of an engine's GPU product: ``count`` is the largest ``nvidia.com/gpu``
    allocatable among the nodes labelled ``nvidia.com/gpu.product`` with it (``nodes`` of them), or
    the GPU catalog's ``gpusPerNode`` when no such node exists yet (``nodes == 0``)."""

    count: int
    nodes: int

    @property
    def from_nodes(self) -> bool:
        return self.nodes > 0

    def describe(self, product: str) -> str:
        """``4 (the largest of 2 node(s) labelled …)``, or ``8 (the GPU catalog's gpusPerNode: …)``."""
        if self.from_nodes:
            return (
                f"{self.count} (the largest of {self.nodes} node(s) labelled {GPU_PRODUCT_LABEL}={product})"
            )
        return (
            f"{self.count} (the GPU catalog's gpusPerNode: no node is labelled {GPU_PRODUCT_LABEL}={product})"
        )


def node_gpus(allocatable: Collection[str | int | None], catalog_gpus_per_node: int) -> NodeGPUs:
    """:class:`NodeGPUs` from the ``nvidia.com/gpu`` allocatable of every node of the product (a
    quantity string as the API server returns it; unparsable or missing values count as 0)."""
    counts = []
    for value in allocatable:
        try:
            counts.append(int(str(value)))
        except ValueError:
            counts.append(0)
    best = max(counts, default=0)
    if best < 1:
        return NodeGPUs(catalog_gpus_per_node, 0)
    return NodeGPUs(best, len(counts))


def gpu_product_aliases(product: str) -> tuple[str, ...]:
    """Node-label spellings of ``product`` besides itself (the catalog's canonical name)."""
    canonical, _ = _catalog(product)
    return (canonical,) if canonical and canonical != product else ()


def runtime_version_incompatibility(
    server_image: str, artifact: Mapping[str, Any] | None, *, image_field: str = "spec.server.image"
) -> Incompatibility | None:
    """An :class:`Incompatibility` naming both sides when the TensorRT-LLM or TensorRT the artifact
    was built with (``artifact``: the LLMEngine's ``status.artifact``, ``tensorrtLLMVersion`` /
    ``tensorrtVersion``, recorded by the builder from its installed libraries) differs from what
    ``server_image`` carries (:func:`trtllm_operator.decide.image_catalog.image_versions`), audit A10:
    an engine deserializes only on the TensorRT that built it ("Version tag does not match",
    docs/reference/tensorrt-llm.md §3.3). ``None`` when they agree or either side is unknown (an image
    outside the catalog, a builder without the library). Versions are compared by release
    (:func:`engine_builder.contract.same_release`).
    """
    serving = image_versions(server_image)
    if serving is None or not artifact:
        return None
    built = runtime_versions(
        {"tensorrt_llm": artifact.get("tensorrtLLMVersion"), "tensorrt": artifact.get("tensorrtVersion")}
    )
    have = {"tensorrt_llm": serving.tensorrt_llm, "tensorrt": serving.tensorrt}
    differ = []
    for lib in RUNTIME_LIBRARIES:
        ours, theirs = built[lib], have[lib]
        if ours and theirs and not same_release(ours, theirs):
            differ.append(lib)
    if not differ:
        return None
    engine_side = " / ".join(
        f"{RUNTIME_LIBRARIES[lib]} {built[lib]}" for lib in RUNTIME_LIBRARIES if built[lib]
    )
    return Incompatibility(
        image_field,
        f"{server_image} ({serving.describe()}, per {serving.source})",
        f"{engine_side} (recorded by its builder in status.artifact)",
        "an engine loads only on the TensorRT-LLM and TensorRT that built it: serve it with an image "
        "carrying those versions, or rebuild the engine in this image (the builder runs in the "
        "engine's spec.runtime.image unless the operator's builder_image says otherwise)",
    )


def engine_incompatibilities(
    deployment: Mapping[str, Any], engine: Mapping[str, Any]
) -> list[Incompatibility]:
    """The compatibility gate for raw objects (image vs ``spec.runtime.image``, the serving image's
    TensorRT-LLM / TensorRT vs the versions the artifact was built with, GPU product/SM).

    The deployment pins a product through ``spec.scheduling.nodeSelector["nvidia.com/gpu.product"]``
    (it must be one of the node-label values the pods require: the engine's product or its catalog
    alias) and can exclude it through its required node affinity; compatible images are declared with
    the annotation :data:`ANNOTATION_COMPATIBLE_IMAGES`.
    """
    dspec, espec = deployment.get("spec") or {}, engine.get("spec") or {}
    engine_image = (espec.get("runtime") or {}).get("image", "")
    server_image = (dspec.get("server") or {}).get("image") or engine_image
    engine_product = (espec.get("gpu") or {}).get("product", "")
    scheduling = dspec.get("scheduling") or {}
    dep_product = (scheduling.get("nodeSelector") or {}).get(GPU_PRODUCT_LABEL)
    annotations = (deployment.get("metadata") or {}).get("annotations") or {}
    engine_canonical, engine_sm = _catalog(engine_product)
    _, dep_sm = _catalog(dep_product)
    products = (engine_product, *gpu_product_aliases(engine_product))
    problems = check_compatibility(
        server_image=server_image,
        engine_runtime_image=engine_image,
        engine_gpu_product=engine_canonical or engine_product,
        deployment_gpu_product=dep_product,
        engine_sm=engine_sm,
        deployment_sm=dep_sm,
        compatible_images=parse_compatible_images(annotations.get(ANNOTATION_COMPATIBLE_IMAGES)),
        engine_gpu_products=products,
    )
    versions = runtime_version_incompatibility(server_image, (engine.get("status") or {}).get("artifact"))
    if versions is not None:
        problems.append(versions)
    dead = affinity_incompatibility(scheduling.get("affinity"), products, GPU_PRODUCT_LABEL)
    return [*problems, dead] if dead else problems
