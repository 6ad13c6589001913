"""kopf's HTTP session to the API server: kopf's own session, with a bounded number of connections.

**What kopf does** (kopf 1.45.2, the pinned version: operator/pyproject.toml): for the credentials a
login handler returns as a ``kopf.ConnectionInfo``, kopf builds one aiohttp session
(``kopf/_cogs/clients/auth.py`` ``APIContext.__init__``) whose connector has **no connection limit**
(``aiohttp.TCPConnector(limit=0, ssl=info.as_ssl_context())``). Every request that finds no idle
connection opens a new TLS connection, which stays open for aiohttp's keep-alive (aiohttp 3.14.5
``connector.py``: 15 s) and holds asyncio's 256 KiB TLS read buffer (CPython 3.11
``Lib/asyncio/sslproto.py``, ``SSLProtocol.max_size``) and OpenSSL's state. At the end of a creation
burst of 1,000 + 1,000 objects kopf sent its diff-base PATCHes up to 48 at once and the operator's
RSS jumped by 19–70 MiB (benchmarks/RESULTS.md, "The burst's peak: kopf's TLS connections"). kopf
has no setting for this (``kopf/_cogs/configs/configuration.py`` ``NetworkingSettings``: timeouts,
backoffs, ``trust_env``); it documents the supported route, a login handler that returns its own
session as ``kopf.AiohttpSession`` "to set the networking parameters, such as timeouts or
connection limits" (nolar/kopf docs/authentication.rst, "Custom HTTP sessions";
``kopf/_cogs/structs/credentials.py`` ``AiohttpSession``). :func:`limited_session` is that session.

**Who shares the connector's limit** (aiohttp counts every acquired connection against
``limit``, ``connector.py`` ``_available_connections``):

* **Watch streams**, one connection each for as long as the stream runs (the API server ends it
  after ``settings.watching.server_timeout``, or its own 30–60 min; kopf reconnects at once). A
  watch waits for a free connection without a time limit (``settings.watching.client_timeout`` is
  None: ``kopf/_cogs/clients/watching.py`` ``watch_objs``). kopf opens
  (``kopf/_core/reactor/orchestration.py`` ``adjust_tasks``):

  - one per watched resource and namespace (``spawn_missing_watchers``; a cluster-scoped resource
    or a cluster-wide operator: one, namespace None). Watched are the resources selected by an
    index, event, timer/daemon or create/update/delete/resume handler
    (``kopf/_core/reactor/observation.py`` ``revise_resources``: ``watched_selectors``); a specific
    selector (group, version, plural) matches one resource at most — two matches are dropped as
    ambiguous (``_disable_ambiguous_selectors``);
  - unless standalone, one per peering resource and namespace (``spawn_missing_peerings``, with
    the resources of ``kopf/_core/engines/peering.py`` ``guess_selectors``: the kopf.dev and the
    zalando.org peering CRDs);
  - with ``settings.scanning.disabled`` off, the CRD watch of the resource observer, and when not
    cluster-wide also the namespace watch of the namespace observer (``observation.py``
    ``resource_observer``, ``namespace_observer``). The operator scans only when cluster-wide
    (:func:`trtllm_operator.handlers.startup.configure_kopf`).

  The operator opens no watch of its own on this session (its handlers use the Kubernetes client,
  :mod:`trtllm_operator.kube`; :mod:`trtllm_operator.handlers.watchstream` only filters kopf's).
* **Requests**: API scans at start, first listings (pages), kopf's PATCHes (diff-base, progress,
  finalizers, peering keep-alives), its Events. Each holds a connection until its response is read
  (``kopf/_cogs/clients/api.py``: ``async with response``) and waits for one at most
  ``settings.networking.request_timeout`` (aiohttp's ``ClientTimeout.total`` runs from before the
  wait for a pooled connection: aiohttp 3.14.5 ``client.py`` ``_request``), then kopf retries it.

A limit at or below the number of watch streams deadlocks: the open watches hold every connection;
requests time out and fail after kopf's retries, and a watcher queued behind the full pool never
lists its resource, so its index never fills and kopf runs no handler at all (kopf waits for every
index first). The limit is therefore :func:`watch_streams` (an upper bound of the streams, derived
from the handler registry and kopf's settings, not a literal) plus :data:`REQUEST_CONNECTIONS`, so
that many connections are always left to requests however many watches are open. A watcher holds
one connection at a time: it reads each listing page whole before the next request, and reconnects
only after its old stream ended (and ``settings.watching.reconnect_backoff`` passed:
``watching.py`` ``infinite_watch``); were both briefly open, the requests' share covers it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection

import aiohttp
import kopf
from kopf._cogs.structs.references import Selector
from kopf._core.engines import peering

from trtllm_operator.kube.client import CONNECTIONS

#: Connections left to kopf's requests beside its watch streams: one per thread of the handler pool
#: (:data:`trtllm_operator.handlers.startup.HANDLER_THREADS`). kopf's requests follow the handlers:
#: most are the one bookkeeping PATCH a handled cause ends with, and at most that many handlers run
#: at once, each making at least one request of its own (through the operator's client), so more
#: PATCHes than that are seldom due at once; a PATCH that finds every connection busy waits for one
#: (within ``settings.networking.request_timeout``) and reuses it instead of opening another TLS
#: connection. Memory: at most this many TLS connections beside the watches (each 256 KiB of asyncio's
#: read buffer plus OpenSSL's state), where the burst had up to 126 (benchmarks/RESULTS.md).
REQUEST_CONNECTIONS = CONNECTIONS

#: kopf's handler registries whose selectors kopf watches (``observation.py`` ``revise_resources``:
#: ``watched_selectors``; webhook-only selectors are served per request and watched by nobody).
_WATCHING_REGISTRIES = ("_indexing", "_watching", "_spawning", "_changing")


def watched_selectors(registry: kopf.OperatorRegistry) -> frozenset[Selector]:
    """The selectors kopf watches a resource for, as kopf 1.45.2 collects them
    (``observation.py`` ``revise_resources``). Raises :class:`ValueError` for a selector that is not
    specific (by category, or every resource): it may match any number of resources, so the watch
    streams cannot be counted before kopf scans the cluster."""
    selectors: frozenset[Selector] = frozenset().union(
        *(getattr(registry, name).get_all_selectors() for name in _WATCHING_REGISTRIES)
    )
    vague = sorted(str(s) for s in selectors if not s.is_specific)
    if vague:
        raise ValueError(f"kopf handlers on unspecific resources cannot be counted as watch streams: {vague}")
    return selectors


def watch_streams(
    registry: kopf.OperatorRegistry, settings: kopf.OperatorSettings, namespaces: Collection[str]
) -> int:
    """An upper bound of the watch streams kopf 1.45.2 keeps open for ``registry``'s handlers with
    ``settings`` (after the operator's startup handlers ran) and ``namespaces`` (empty: cluster-wide).

    Every watched and peering resource is counted once per namespace (kopf watches a cluster-scoped
    one once, so the bound is above the real count when several namespaces are watched); a resource
    the cluster does not serve is counted too. Raises :class:`ValueError` as
    :func:`watched_selectors`."""
    scopes = max(1, len(set(namespaces)))
    resources = len(watched_selectors(registry))
    peerings = len(list(peering.guess_selectors(settings=settings)))
    observers = 0
    if not settings.scanning.disabled:
        observers += 1  # the CRD watch (resource_observer)
        if namespaces:
            observers += 1  # the namespace watch (namespace_observer)
    return (resources + peerings) * scopes + observers


#: How many of the last sessions :func:`session_for` hands back for equal credentials: kopf 1.45.2 keeps
#: the last three invalidated credentials of a login handler (``credentials.py`` ``Vault.invalidate``:
#: ``self._invalid[key][-2:] + [current]``).
_REMEMBERED = 3
_sessions: list[tuple[asyncio.AbstractEventLoop, kopf.ConnectionInfo, int, kopf.AiohttpSession]] = []


def session_for(info: kopf.ConnectionInfo, limit: int) -> kopf.AiohttpSession:
    """:func:`limited_session` for ``info``, or the very session handed out before in this event loop
    for equal credentials and limit (the last :data:`_REMEMBERED`).

    kopf keeps credentials that the API server refused (401) and drops a login result *equal* to one
    of them, so that re-authenticating with the same invalid credentials ends in ``LoginError``
    instead of looping (kopf 1.45.2 ``credentials.py`` ``Vault._update_converted``: ``info not in
    [data.info for data in self._invalid[key]]``). A ``kopf.AiohttpSession`` compares its
    ``aiohttp_session`` by identity, so a new session for the same refused token is never equal:
    the operator re-authenticated thousands of times a minute and never exited (fresh-user trial 51
    Y1; kopf's own ``ConnectionInfo`` does not loop). Handing back the same object for the same
    credentials keeps kopf's guard working; new credentials (a rotated token) get a new session.
    Only within one event loop: kopf closes its sessions when its loop ends, and an aiohttp session is
    bound to the loop it was made in, so an operator started again in the same process (the
    in-process tests do) gets a new one."""
    loop = asyncio.get_running_loop()
    _sessions[:] = [entry for entry in _sessions if entry[0] is loop]
    for _, known, known_limit, session in _sessions:
        if known == info and known_limit == limit:
            return session
    session = limited_session(info, limit)
    _sessions.append((loop, info, limit, session))
    del _sessions[:-_REMEMBERED]
    return session


def limited_session(info: kopf.ConnectionInfo, limit: int) -> kopf.AiohttpSession:
    """kopf 1.45.2's own session for ``info`` (``kopf/_cogs/clients/auth.py`` ``APIContext``:
    TLS context with the CA, client certificate and ``insecure`` from ``info.as_ssl_context()``,
    the ``Authorization`` header from ``info.as_http_headers()``, ``info.proxy_url`` and
    ``info.trust_env``, aiohttp's default timeouts and keep-alive; no ``auth``, which kopf's
    ``as_aiohttp_basic_auth()`` never returns), but with at most ``limit`` connections, as a
    ``kopf.AiohttpSession`` carrying ``info``'s server, namespace, priority and expiration.

    Call it inside the operator's event loop (aiohttp binds the session to the running loop). kopf
    owns the session from then on and closes it with the credentials (``APIContext.close``)."""
    if limit < 1:
        raise ValueError(f"a connection limit must be at least 1 (got {limit}); 0 means no limit in aiohttp")
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=info.as_ssl_context()),
        headers=info.as_http_headers(),
        proxy=info.proxy_url,
        trust_env=info.trust_env,
    )
    context = {
        field.name: getattr(info, field.name)
        for field in dataclasses.fields(kopf.AiohttpSession)
        if field.name != "aiohttp_session"
    }
    return kopf.AiohttpSession(aiohttp_session=session, **context)
