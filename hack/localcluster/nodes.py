"""Simulated nodes of the local control plane: GPU nodes labelled as GPU Feature Discovery does.

kwok (started with ``--manage-all-nodes``) makes every Node object Ready; the scheduler then treats
``nvidia.com/gpu`` as an ordinary extended resource, so a pod asking for more GPUs than any node has
stays Pending with reason Unschedulable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

GPU_RESOURCE = "nvidia.com/gpu"

# GPU Feature Discovery's nvidia.com/gpu.memory label is the per-GPU framebuffer in MiB, as nvidia-smi
# reports it.
GPU_MEMORY_MIB: dict[str, int] = {
    "NVIDIA-H100-80GB-HBM3": 81559,
    "NVIDIA-A100-SXM4-80GB": 81920,
    "NVIDIA-A100-SXM4-40GB": 40960,
    "NVIDIA-H200": 143771,
    "NVIDIA-L40S": 46068,
}
GPU_FAMILY: dict[str, str] = {
    "NVIDIA-H100-80GB-HBM3": "hopper",
    "NVIDIA-H200": "hopper",
    "NVIDIA-A100-SXM4-80GB": "ampere",
    "NVIDIA-A100-SXM4-40GB": "ampere",
    "NVIDIA-L40S": "ada-lovelace",
}


@dataclass(frozen=True)
class NodeSpec:
    """One simulated node: name, allocatable cpu (cores), memory (quantity string), GPU product and count."""

    name: str
    cpu: str = "200"
    memory: str = "2Ti"
    pods: str = "110"
    gpu_product: str | None = None
    gpus: int = 0
    gpu_memory_mib: int | None = None
    extra_labels: dict[str, str] = field(default_factory=dict)

    def labels(self) -> dict[str, str]:
        """Well-known node labels plus GPU Feature Discovery's ``nvidia.com/gpu.*`` labels for GPU nodes."""
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
        }
        if self.gpu_product is not None and self.gpus > 0:
            memory = self.gpu_memory_mib or GPU_MEMORY_MIB.get(self.gpu_product)
            if memory is None:
                raise ValueError(
                    f"gpu_memory_mib is required for GPU product {self.gpu_product!r}: known products are "
                    f"{sorted(GPU_MEMORY_MIB)}"
                )
            labels.update(
                {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": self.gpu_product,
                    "nvidia.com/gpu.memory": str(memory),
                    "nvidia.com/gpu.count": str(self.gpus),
                }
            )
            if self.gpu_product in GPU_FAMILY:
                labels["nvidia.com/gpu.family"] = GPU_FAMILY[self.gpu_product]
        labels.update(self.extra_labels)
        return labels

    def resources(self) -> dict[str, str]:
        """Capacity (= allocatable) of the node."""
        res = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods, "ephemeral-storage": "30Ti"}
        if self.gpus > 0:
            res[GPU_RESOURCE] = str(self.gpus)
        return res

    def manifest(self) -> dict[str, Any]:
        """The v1 Node object (with status capacity/allocatable; kwok's node-initialize stage keeps them)."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": self.labels(),
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"providerID": f"kwok://{self.name}"},
            "status": {"capacity": self.resources(), "allocatable": self.resources()},
        }


DEFAULT_NODES: tuple[NodeSpec, ...] = (
    NodeSpec("h100-0", cpu="200", memory="2Ti", gpu_product="NVIDIA-H100-80GB-HBM3", gpus=8),
    NodeSpec("h100-1", cpu="200", memory="2Ti", gpu_product="NVIDIA-H100-80GB-HBM3", gpus=8),
    NodeSpec("a100-0", cpu="120", memory="1Ti", gpu_product="NVIDIA-A100-SXM4-80GB", gpus=4),
    NodeSpec("a100-1", cpu="120", memory="1Ti", gpu_product="NVIDIA-A100-SXM4-80GB", gpus=4),
    NodeSpec("cpu-0", cpu="32", memory="128Gi"),
)


def _core(api: client.ApiClient | client.CoreV1Api) -> client.CoreV1Api:
    return api if isinstance(api, client.CoreV1Api) else client.CoreV1Api(api)


def create_nodes(
    api: client.ApiClient | client.CoreV1Api, specs: list[NodeSpec] | tuple[NodeSpec, ...]
) -> list[str]:
    """Create the given Nodes (an existing node of the same name is left as it is); returns their names."""
    core = _core(api)
    names = []
    for spec in specs:
        body = spec.manifest()
        try:
            core.create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        else:
            # Node creation may drop status; set capacity/allocatable explicitly.
            core.patch_node_status(spec.name, {"status": body["status"]})
        names.append(spec.name)
    return names


def add_gpu_nodes(
    api: client.ApiClient | client.CoreV1Api,
    count: int,
    product: str = "NVIDIA-H100-80GB-HBM3",
    gpus: int = 8,
    prefix: str = "gpu",
    *,
    start: int = 0,
    gpu_memory_mib: int | None = None,
    cpu: str = "200",
    memory: str = "2Ti",
) -> list[str]:
    """Add ``count`` GPU nodes named ``<prefix>-<start>`` … ``<prefix>-<start+count-1>``.

    Each has ``gpus`` × ``nvidia.com/gpu`` of ``product`` (a GPU Feature Discovery product string such
    as ``NVIDIA-H100-80GB-HBM3``); ``gpu_memory_mib`` is needed for products not in ``GPU_MEMORY_MIB``.
    ``api`` is a ``kubernetes.client.ApiClient`` or ``CoreV1Api``. Existing nodes are kept (idempotent).
    Returns the node names; use ``wait_nodes_ready`` to wait until kwok has made them Ready.
    """
    if count < 0 or gpus < 1:
        raise ValueError(f"count must be >= 0 and gpus >= 1, got count={count}, gpus={gpus}")
    specs = [
        NodeSpec(
            f"{prefix}-{i}",
            cpu=cpu,
            memory=memory,
            gpu_product=product,
            gpus=gpus,
            gpu_memory_mib=gpu_memory_mib,
        )
        for i in range(start, start + count)
    ]
    return create_nodes(api, specs)


def node_is_ready(node: Any) -> bool:
    """True if a v1.Node (client model) has condition Ready=True."""
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def wait_nodes_ready(
    api: client.ApiClient | client.CoreV1Api, names: list[str], timeout: float = 60.0
) -> None:
    """Wait until every named node is Ready; raises TimeoutError naming the nodes that are not."""
    core = _core(api)
    deadline = time.monotonic() + timeout
    pending = set(names)
    while True:
        ready = {n.metadata.name for n in core.list_node().items if node_is_ready(n)}
        pending -= ready
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not Ready after {timeout:.0f} s: {sorted(pending)} (is kwok running?)")
        time.sleep(0.2)


def delete_nodes(api: client.ApiClient | client.CoreV1Api, names: list[str]) -> None:
    """Delete the named nodes (those :func:`add_gpu_nodes` made); one already gone is not an error."""
    core = _core(api)
    for name in names:
        try:
            core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
