"""The per-deployment credentials Secret: drawn once, created if absent, never read back.

What the Secret holds and why: :mod:`trtllm_operator.render.credentials`. This module is the shell
around it: it draws the random values (``secrets.token_hex`` for Triton's admin header, an ed25519
key pair from ``cryptography`` in OpenSSH formats) and creates the Secret when its metadata
(``PartialObjectMetadata``: the operator never reads a Secret's values to manage it) says there is
none. An existing Secret of that name the LLMDeployment does not control is a
:class:`~trtllm_operator.decide.ownership.ChildConflict`: it is neither patched nor adopted, and the
pods — which would mount it — are not rendered. RBAC: ``secrets`` ``get`` (already needed for the
opt-in label) and ``create``; no ``patch``, ``update``, ``delete``, ``list`` or ``watch``
(docs/security.md).
"""

from __future__ import annotations

import secrets
import time

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from kubernetes.client.exceptions import ApiException

from trtllm_operator.decide.ownership import ChildConflict, control_conflict
from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.kube.client import SECRET, Kube
from trtllm_operator.render.credentials import (
    ADMIN_KEY_BYTES,
    credentials_secret_name,
    desired_credentials_secret,
)


def new_ssh_key_pair(comment: str) -> tuple[str, str]:
    """``(private key, public key)`` of a fresh ed25519 pair: the private key in OpenSSH's own PEM
    format (``-----BEGIN OPENSSH PRIVATE KEY-----``, unencrypted: read by ``ssh -i`` in the pod), the
    public key as one ``authorized_keys`` line ``ssh-ed25519 AAAA… <comment>``."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, f"{public.decode()} {comment}\n"


#: ``(namespace, Secret name) → (controller uid, monotonic seconds)`` of Secrets this process saw
#: present and controlled by that LLMDeployment: re-checked (one metadata GET) at most this often,
#: not on every reconcile (issue 20: requests per object). There is no watch on Secrets (no
#: list/watch RBAC, docs/security.md), so a Secret deleted by hand is recreated within this period
#: (its pods cannot start without it; the drift resync reconciles every deployment in that time).
_CONFIRMED: dict[tuple[str, str], tuple[str, float]] = {}
CONFIRM_SECONDS = 300.0


def ensure_credentials(
    kube: Kube, params: ServingParams, *, create_first: bool = False
) -> ChildConflict | None:
    """Create ``<name>-credentials`` unless it exists; the conflict when it exists and this
    LLMDeployment does not control it. An existing Secret it controls is left as it is (its values
    are in use by running pods).

    ``create_first``: the caller expects no Secret (a new LLMDeployment): create it at once — a 409
    AlreadyExists reads the metadata of the one there and checks it the same way — instead of
    reading first (one request instead of two for every new deployment, issue 20)."""
    namespace, name = params.namespace, credentials_secret_name(params.name)
    seen = _CONFIRMED.get((namespace, name))
    if seen is not None and seen[0] == params.owner.uid and time.monotonic() - seen[1] < CONFIRM_SECONDS:
        return None
    conflict = _ensure(kube, params, namespace, name, create_first=create_first)
    if conflict is None:
        _CONFIRMED[(namespace, name)] = (params.owner.uid, time.monotonic())
    else:
        _CONFIRMED.pop((namespace, name), None)
    return conflict


def _ensure(
    kube: Kube, params: ServingParams, namespace: str, name: str, *, create_first: bool
) -> ChildConflict | None:
    live = None if create_first else kube.get_metadata(SECRET, namespace, name)
    if live is None:
        private, public = new_ssh_key_pair(f"{params.namespace}/{params.name}")
        body = desired_credentials_secret(
            params,
            admin_key=secrets.token_hex(ADMIN_KEY_BYTES),
            ssh_private_key=private,
            ssh_public_key=public,
        )
        try:
            kube.create(SECRET, namespace, body)
            return None
        except ApiException as exc:
            if exc.status != 409:
                raise
        live = kube.get_metadata(SECRET, namespace, name)
        if live is None:
            return None  # created and deleted in between: the next reconcile creates it again
    return control_conflict({"metadata": live}, SECRET.kind, params.owner.uid)
