"""The per-deployment credentials Secret ``<name>-credentials``: Triton's admin header value and the
multi-node replica's SSH key. Pure: the random values come in (:mod:`trtllm_operator.handlers.credentials`
draws them once, when the Secret is created).

Why a Secret of its own per LLMDeployment (issue 24 item 5):

* **Triton's admin APIs.** ``tritonserver`` answers the shared-memory, model-repository, trace and
  logging APIs only to a request that carries the header ``admin-key: <value>`` (HTTP) /
  ``triton-grpc-protocol-admin-key: <value>`` (gRPC) (:data:`RESTRICTED_APIS`,
  :func:`trtllm_operator.render.serving.tritonserver_args`). The value is :data:`KEY_ADMIN` of this
  Secret; the serving container gets it as the environment variable :data:`ADMIN_KEY_ENV`
  (``secretKeyRef``), so it is in no manifest, ConfigMap or log. Whoever may read Secrets in the
  namespace may use the admin APIs; clients and probes never need it.
* **SSH between the pods of a multi-node replica.** The leader's ``mpirun`` reaches the workers'
  ``sshd`` with :data:`KEY_SSH_PRIVATE`; the workers accept only :data:`KEY_SSH_AUTHORIZED` (its
  public half), never a key baked into the serving image, which every holder of the image shares.
  One ed25519 pair per LLMDeployment: a pod of another deployment cannot log in to these workers.

The Secret is ``immutable: true`` (Kubernetes "Immutable Secrets", v1.21 GA): nobody edits the key
in place; deleting the Secret makes the operator draw new values on its next reconcile (pods started
before keep the values they were started with until they restart). It is controlled by the
LLMDeployment (garbage-collected with it) and created only when absent — the operator never reads
its values back, and never patches, adopts or deletes a Secret it did not create
(:class:`~trtllm_operator.decide.ownership.ChildConflict`).
"""

from __future__ import annotations

from typing import Any

from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.serving import (  # noqa: F401  (re-exported: the Secret's consumers)
    ADMIN_HEADER,
    ADMIN_KEY_ENV,
    GRPC_HEADER_PREFIX,
    RESTRICTED_APIS,
    child_name,
    metadata,
)

#: Suffix of the Secret's name: ``<name>-credentials``.
CREDENTIALS_SUFFIX = "credentials"
#: Data keys of the Secret.
KEY_ADMIN = "triton-admin-key"
KEY_SSH_PRIVATE = "id_ed25519"
KEY_SSH_AUTHORIZED = "authorized_keys"
#: Random bytes of the admin header value (hex-encoded: 64 characters).
ADMIN_KEY_BYTES = 32


def credentials_secret_name(name: str) -> str:
    """``<name>-credentials`` (a DNS label of at most 63 characters)."""
    return child_name(name, CREDENTIALS_SUFFIX)


def desired_credentials_secret(
    params: ServingParams, *, admin_key: str, ssh_private_key: str, ssh_public_key: str
) -> dict[str, Any]:
    """``v1`` Secret ``<name>-credentials`` with the values given (OpenSSH text formats for the key
    pair), controlled by the LLMDeployment, immutable."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(params, credentials_secret_name(params.name)),
        "type": "Opaque",
        "immutable": True,
        "stringData": {
            KEY_ADMIN: admin_key,
            KEY_SSH_PRIVATE: ssh_private_key,
            KEY_SSH_AUTHORIZED: ssh_public_key,
        },
    }


def admin_key_env(params: ServingParams) -> dict[str, Any]:
    """The serving container's :data:`ADMIN_KEY_ENV` from the Secret (not optional: a pod whose
    Secret is missing waits in ``CreateContainerConfigError`` until the operator recreates it)."""
    return {
        "name": ADMIN_KEY_ENV,
        "valueFrom": {"secretKeyRef": {"name": credentials_secret_name(params.name), "key": KEY_ADMIN}},
    }


def ssh_key_volume(params: ServingParams, *, leader: bool) -> dict[str, Any]:
    """The Secret volume of a multi-node pod: the private key on the leader, the public key as
    ``authorized_keys`` on the workers; each file ``0400`` (``ssh`` refuses a private key others can
    read). The worker's ``sshd`` reads a root-owned copy (:mod:`trtllm_operator.render.launch`)."""
    key = KEY_SSH_PRIVATE if leader else KEY_SSH_AUTHORIZED
    return {
        "name": "ssh-key",
        "secret": {
            "secretName": credentials_secret_name(params.name),
            "defaultMode": 0o400,
            "items": [{"key": key, "path": key}],
        },
    }
