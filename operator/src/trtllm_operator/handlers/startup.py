"""kopf-level configuration shared by every controller of this operator.

Applied once per operator start (``@kopf.on.startup``) from :func:`trtllm_operator.settings.current`:

* kopf's bookkeeping lives in annotations under ``kopf.trtllm-operator.dev`` (progress and the
  diff-base). Our CRDs declare their status fields explicitly, so kopf's default ``status.kopf``
  storage would be pruned by the API server ("Patching failed with inconsistencies",
  docs/reference/local-control-plane.md §D4). Cost, measured by benchmarks/scale.py: the diff-base
  (``last-handled-configuration``) is one PATCH per object when it is created and when its spec
  changes — kopf needs it to tell creation, update and resume apart across restarts, so it stays;
  progress records cost nothing while every handler of a cause succeeds in one cycle (the operator
  runs kopf with ``lifecycles.all_at_once``, commands/run.py; kopf applies a cycle's progress,
  purge and diff-base in one PATCH) and one PATCH per retry otherwise. Status storage would not
  save a write (it is a PATCH of the status subresource instead). kopf's finalizer is added only
  where a handler needs one (a timer, a non-optional delete handler): the drift resyncs are loops
  (``plumbing.resync_forever``), not per-object timers, so a plain LLMEngine or LLMDeployment
  carries none (docs/reliability.md "kopf's writes"). The diff-base storage is kopf's, but builds
  the essence without deep-copying the status and managedFields it drops
  (:mod:`trtllm_operator.handlers.diffbase`).
* synchronous handlers run on :class:`TimedThreadPool` (:data:`HANDLER_THREADS` threads), which
  times how long each waited for a thread; kopf waits up to 30 s for the watch event of its own
  bookkeeping patch (``persistence.consistency_timeout``).
* API errors (also watch reconnects) are retried at most 5 s apart (:data:`API_ERROR_BACKOFFS`), so
  the operator is back within seconds of an API-server outage ending.
* kopf's own log-to-Event posting is limited to warnings: controllers post their own Events with
  stable reasons (:func:`trtllm_operator.kube.post_event`).
* kopf logs in with exactly the credentials of the operator's own API client
  (:func:`trtllm_operator.kube.default_kube`: kubeconfig or in-cluster service account), so kopf's
  watches and our writes always talk to the same cluster as the same user; its session is kopf's
  own with a bounded number of connections (:mod:`trtllm_operator.handlers.kopfsession`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import kopf

from trtllm_operator.api.wire import KOPF_ANNOTATION_PREFIX
from trtllm_operator.handlers.diffbase import LeanAnnotationsDiffBaseStorage
from trtllm_operator.handlers.kopfsession import REQUEST_CONNECTIONS, session_for, watch_streams
from trtllm_operator.handlers.plumbing import WORKQUEUE, stop_resyncs
from trtllm_operator.handlers.watchstream import LIST_CHUNK
from trtllm_operator.kube import default_kube
from trtllm_operator.kube.client import API_ERROR_BACKOFFS, CONNECTIONS
from trtllm_operator.logging import redact_kopf_events
from trtllm_operator.metrics.operator_metrics import HANDLER_QUEUE
from trtllm_operator.settings import current

#: Threads that run synchronous handlers: one per connection of the API client
#: (:data:`~trtllm_operator.kube.client.CONNECTIONS`). kopf's default executor is Python's
#: ThreadPoolExecutor default, min(32, CPUs + 4): 6 on a 2-core node, few for handlers that spend
#: most of their time waiting on API responses (benchmarks/scale.py,
#: trtllm_operator_handler_queue_seconds).
HANDLER_THREADS = CONNECTIONS

_T = TypeVar("_T")


class TimedThreadPool(concurrent.futures.ThreadPoolExecutor):
    """kopf's executor for synchronous handlers (``settings.execution.executor``), timing how long
    each call waited for a free thread (``trtllm_operator_handler_queue_seconds``): handlers use the
    synchronous kubernetes client, so a busy pool shows up here before it shows up as latency."""

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[_T]:
        queued = time.monotonic()

        def timed() -> _T:
            HANDLER_QUEUE.observe(time.monotonic() - queued)
            return fn(*args, **kwargs)

        return super().submit(timed)


@kopf.on.startup()
def configure_kopf(settings: kopf.OperatorSettings, **_: Any) -> None:
    ours = current()
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = LeanAnnotationsDiffBaseStorage(prefix=KOPF_ANNOTATION_PREFIX)
    settings.posting.level = logging.WARNING
    redact_kopf_events()  # kopf's Events carry log messages: same redaction as log lines
    settings.posting.reporting_component = ours.field_manager
    settings.execution.default_backoff = ours.error_backoff_seconds
    settings.execution.executor = TimedThreadPool(
        max_workers=HANDLER_THREADS, thread_name_prefix="kopf-handler"
    )
    WORKQUEUE.executor = settings.execution.executor
    # kopf waits this long for the watch event of its own bookkeeping patch before it handles an
    # older event of the object (kopf 1.45.2 kopf/_core/reactor/queueing.py, "consistency"); with the
    # default 5 s, a loaded API server made kopf handle stale events as new creations — twice the
    # handling and the bookkeeping patches (benchmarks/scale.py).
    settings.persistence.consistency_timeout = 30.0
    settings.networking.request_timeout = 60
    # first listings in pages, not one whole-resource response (handlers/watchstream.py)
    settings.watching.chunk_size = LIST_CHUNK
    settings.networking.error_backoffs = API_ERROR_BACKOFFS
    if ours.watch_server_timeout_seconds is not None:
        settings.watching.server_timeout = ours.watch_server_timeout_seconds
    settings.peering.standalone = ours.standalone
    # Watching listed namespaces: serve exactly those (no namespace listing/watching, which would
    # need cluster-wide RBAC on namespaces; the chart grants none in namespaced mode).
    settings.scanning.disabled = not ours.clusterwide


@kopf.on.cleanup()
async def stop_resync_loops(**_: Any) -> None:
    """Stop the controllers' drift loops (:func:`~trtllm_operator.handlers.plumbing.start_resync`)."""
    await stop_resyncs()


@kopf.on.login()
async def login(settings: kopf.OperatorSettings, **_: Any) -> kopf.AiohttpSession:
    """kopf's credentials (:func:`connection_info`) in kopf's own session with at most
    :func:`~trtllm_operator.handlers.kopfsession.watch_streams` +
    :data:`~trtllm_operator.handlers.kopfsession.REQUEST_CONNECTIONS` connections
    (:mod:`trtllm_operator.handlers.kopfsession`; the same session for the same credentials, so kopf
    still ends with ``LoginError`` when they are refused:
    :func:`~trtllm_operator.handlers.kopfsession.session_for`). kopf calls it once its startup
    handlers have run (kopf 1.45.2 ``kopf/_core/reactor/running.py``: the credentials retriever waits for
    ``started_flag``), so ``settings`` are as :func:`configure_kopf` left them; the handlers are
    kopf's default registry, the one ``kopf.run`` serves (commands/run.py passes none)."""
    info = await asyncio.to_thread(connection_info)  # reads the kubeconfig: off the event loop
    streams = watch_streams(kopf.get_default_registry(), settings, current().namespaces)
    return session_for(info, streams + REQUEST_CONNECTIONS)


def connection_info() -> kopf.ConnectionInfo:
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
