"""kopf-level configuration shared by every controller of this operator.

Applied once per operator start (``@kopf.on.startup``) from :func:`trtllm_operator.settings.current`:

* kopf's bookkeeping lives in annotations under ``kopf.trtllm-operator.dev`` (progress and the
  diff-base). Our CRDs declare their status fields explicitly, so kopf's default ``status.kopf``
  storage would be pruned by the API server ("Patching failed with inconsistencies",
  docs/reference/local-control-plane.md §D4).
* API errors (also watch reconnects) are retried at most 5 s apart (:data:`API_ERROR_BACKOFFS`), so
  the operator is back within seconds of an API-server outage ending.
* kopf's own log-to-Event posting is limited to warnings: controllers post their own Events with
  stable reasons (:func:`trtllm_operator.kube.post_event`).
* kopf logs in with exactly the credentials of the operator's own API client
  (:func:`trtllm_operator.kube.default_kube`: kubeconfig or in-cluster service account), so kopf's
  watches and our writes always talk to the same cluster as the same user.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from trtllm_operator.api.wire import KOPF_ANNOTATION_PREFIX
from trtllm_operator.kube import default_kube
from trtllm_operator.logging import redact_kopf_events
from trtllm_operator.settings import current

#: Delays (s) between retries of a failed API request, watch reconnects included. kopf's default
#: (1, 1, 2, 3, 5, 8, 13, 21) sleeps up to 21 s before the next attempt, so after an API-server outage
#: the operator noticed the API's return only 14 s later (tests/integration/test_faults.py). Capped
#: at 5 s, with about the same total (57 s) before a request gives up.
API_ERROR_BACKOFFS = (1, 1, 2, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5)


@kopf.on.startup()
def configure_kopf(settings: kopf.OperatorSettings, **_: Any) -> None:
    ours = current()
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=KOPF_ANNOTATION_PREFIX)
    settings.posting.level = logging.WARNING
    redact_kopf_events()  # kopf's Events carry log messages: same redaction as log lines
    settings.posting.reporting_component = ours.field_manager
    settings.execution.default_backoff = ours.error_backoff_seconds
    settings.networking.request_timeout = 60
    settings.networking.error_backoffs = API_ERROR_BACKOFFS
    if ours.watch_server_timeout_seconds is not None:
        settings.watching.server_timeout = ours.watch_server_timeout_seconds
    settings.peering.standalone = ours.standalone
    # Watching listed namespaces: serve exactly those (no namespace listing/watching, which would
    # need cluster-wide RBAC on namespaces; the chart grants none in namespaced mode).
    settings.scanning.disabled = not ours.clusterwide


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo:
    """kopf's credentials from the operator's API client configuration (same as kopf's
    ``login_via_client``, but from our client instead of the library's process-wide default)."""
    cfg: Any = default_kube(current().field_manager).api_client.configuration
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = (
        (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    )
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        username=cfg.username or None,
        password=cfg.password or None,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )
