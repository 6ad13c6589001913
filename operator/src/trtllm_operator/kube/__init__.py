"""API access: the only package that talks to the API server (besides kopf's own watches).

* :mod:`.client` — :class:`Kube` (dict-in/dict-out get, list, create, ``create_or_get`` with
  AlreadyExists handling, merge/JSON patch, delete) and the :class:`Resource` constants.
* :mod:`.status` — :func:`patch_status` / :func:`update_conditions`: status writes guarded by
  what the decision read (JSON-patch ``test`` of uid, generation, deletion, honoured annotations
  and status; a ``resourceVersion`` precondition after two refusals), retried when refused,
  merging conditions by type.
* :mod:`.events` — :func:`post_event`.
"""

from trtllm_operator.kube.client import (
    CONFIG_MAP,
    DEPLOYMENT,
    EVENT,
    HPA,
    JOB,
    LLM_DEPLOYMENT,
    LLM_ENGINE,
    LWS,
    PDB,
    POD,
    PVC,
    REPLICA_SET,
    SCALED_OBJECT,
    SECRET,
    SERVICE,
    Kube,
    Resource,
    default_kube,
    is_conflict,
    is_not_found,
    load_api_client,
    set_default_kube,
)
from trtllm_operator.kube.events import post_event
from trtllm_operator.kube.status import StatusConflictError, patch_status, update_conditions

__all__ = [
    "CONFIG_MAP",
    "DEPLOYMENT",
    "EVENT",
    "HPA",
    "JOB",
    "LLM_DEPLOYMENT",
    "LLM_ENGINE",
    "LWS",
    "PDB",
    "POD",
    "PVC",
    "REPLICA_SET",
    "SCALED_OBJECT",
    "SECRET",
    "SERVICE",
    "Kube",
    "Resource",
    "StatusConflictError",
    "default_kube",
    "is_conflict",
    "is_not_found",
    "load_api_client",
    "patch_status",
    "post_event",
    "set_default_kube",
    "update_conditions",
]
