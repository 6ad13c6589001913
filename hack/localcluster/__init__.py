"""Local Kubernetes control plane for trtllm-operator tests and demos (real apiserver, kwok nodes).

Import with ``hack/`` on ``sys.path`` (tests/conftest.py does this). Command line: ``hack/local-cluster``.
"""

from .controlplane import (
    COMPONENTS,
    DEFAULT_WORK_DIR,
    KWOK_STAGES_DIR,
    POD_CIDR,
    REPO_ROOT,
    ClusterError,
    ControlPlane,
    crd_established,
    free_port,
    tail,
    wait_crds_established,
)
from .nodes import (
    DEFAULT_NODES,
    GPU_MEMORY_MIB,
    GPU_RESOURCE,
    NodeSpec,
    add_gpu_nodes,
    create_nodes,
    delete_nodes,
    node_is_ready,
    wait_nodes_ready,
)
from .testbin import find_bin_dir

__all__ = [
    "COMPONENTS",
    "DEFAULT_NODES",
    "DEFAULT_WORK_DIR",
    "GPU_MEMORY_MIB",
    "GPU_RESOURCE",
    "KWOK_STAGES_DIR",
    "POD_CIDR",
    "REPO_ROOT",
    "ClusterError",
    "ControlPlane",
    "NodeSpec",
    "add_gpu_nodes",
    "crd_established",
    "create_nodes",
    "delete_nodes",
    "find_bin_dir",
    "free_port",
    "node_is_ready",
    "tail",
    "wait_crds_established",
    "wait_nodes_ready",
]
