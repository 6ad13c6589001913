"""The operator's ``/metrics`` endpoint, for authenticated and authorized clients only.

The pattern of controller-runtime's metrics filter (kubernetes-sigs/controller-runtime
``pkg/metrics/filters/filters.go``, ``WithAuthenticationAndAuthorization``, commit 8f8247f): every
request must carry ``Authorization: Bearer <token>``; the token is authenticated with a
``TokenReview`` (authentication.k8s.io/v1) and the user it names is authorized with a
``SubjectAccessReview`` (authorization.k8s.io/v1) for the request's verb (the HTTP method in lower
case) on the non-resource URL of its path. So a client needs a (Cluster)Role granting
``nonResourceURLs: ["/metrics"], verbs: ["get"]`` — the chart's ``<release>-metrics-reader`` — and the
operator needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews`` (the chart's ClusterRole).
Answers as controller-runtime's: 401 without a token or for one the API server does not
authenticate, 403 when not authorized, 500 when a review cannot be made. Review results are cached
as there: an authentication for 1 minute, an allow for 5 minutes, a deny for 30 seconds.

The liveness endpoint (kopf's ``/healthz`` on its own port) stays unauthenticated: the kubelet's
probes carry no token.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from kubernetes import client
from prometheus_client import CollectorRegistry, make_wsgi_app

from trtllm_operator.kube.client import SUBJECT_ACCESS_REVIEW, TOKEN_REVIEW, call_json
from trtllm_operator.kube.metrics_tls import ServingCertificate

log = logging.getLogger(__name__)

#: Cache lifetimes (seconds) of controller-runtime's filter: DelegatingAuthenticatorConfig.CacheTTL
#: and DelegatingAuthorizerConfig.AllowCacheTTL / DenyCacheTTL (filters.go, commit 8f8247f).
AUTHN_TTL_SECONDS = 60.0
ALLOW_TTL_SECONDS = 300.0
DENY_TTL_SECONDS = 30.0
#: TokenAccessReviewTimeout of the same filter.
REVIEW_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class User:
    """Who a token belongs to, as the TokenReview's ``status.user`` says."""

    name: str
    uid: str | None
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Denial:
    """A refused request: HTTP status and the body text."""

    status: int
    text: str


_REASONS = {401: "Unauthorized", 403: "Forbidden", 500: "Internal Server Error"}


class MetricsAuthorizer:
    """TokenReview + SubjectAccessReview for one request (:meth:`check`), with result caches.

    ``clock`` is monotonic seconds (tests pass their own to step past a TTL)."""

    def __init__(self, api_client: client.ApiClient, clock: Callable[[], float] = time.monotonic) -> None:
        self._api_client = api_client
        self._clock = clock
        self._lock = threading.Lock()
        self._users: dict[str, tuple[float, User | None]] = {}
        self._decisions: dict[tuple[User, str, str], tuple[float, bool]] = {}

    def check(self, authorization: str | None, path: str, method: str) -> Denial | None:
        """None when the request may read ``path``; else why not."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Denial(401, "Unauthorized")
        try:
            user = self._authenticate(token)
        except Exception as exc:  # the API server's answer, or none: a 500 as controller-runtime
            log.error("metrics: TokenReview failed: %s", type(exc).__name__)
            return Denial(500, "Authentication failed")
        if user is None:
            return Denial(401, "Unauthorized")
        verb = method.lower()
        try:
            allowed = self._authorize(user, path, verb)
        except Exception as exc:
            log.error("metrics: SubjectAccessReview for %s failed: %s", user.name, type(exc).__name__)
            return Denial(500, f"Authorization for user {user.name} failed")
        if not allowed:
            log.debug("metrics: %s may not %s %s", user.name, verb, path)
            return Denial(403, f"Authorization denied for user {user.name}")
        return None

    def _authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()  # never keep the token itself
        now = self._clock()
        with self._lock:
            cached = self._users.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
        # POST tokenreviews with the body the typed client sent (V1TokenReview without
        # apiVersion/kind, None fields left out): the client's generic call keeps its typed API
        # classes unloaded (trtllm_operator.kube.client).
        review = call_json(
            self._api_client,
            "POST",
            TOKEN_REVIEW.path(None),
            body={"spec": {"token": token}},
            timeout=REVIEW_TIMEOUT_SECONDS,
        )
        status = review.get("status") or {}
        u = status.get("user")
        user = None
        if status.get("authenticated") and u is not None:
            user = User(
                name=u.get("username") or "",
                uid=u.get("uid"),
                groups=tuple(u.get("groups") or ()),
                extra=tuple(sorted((k, tuple(v or ())) for k, v in (u.get("extra") or {}).items())),
            )
        with self._lock:
            self._users[key] = (now + AUTHN_TTL_SECONDS, user)
            _expire(self._users, now)
        return user

    def _authorize(self, user: User, path: str, verb: str) -> bool:
        key = (user, path, verb)
        now = self._clock()
        with self._lock:
            cached = self._decisions.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "extra": {k: list(v) for k, v in user.extra},
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid is not None:
            spec["uid"] = user.uid
        review = call_json(
            self._api_client,
            "POST",
            SUBJECT_ACCESS_REVIEW.path(None),
            body={"spec": spec},
            timeout=REVIEW_TIMEOUT_SECONDS,
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        with self._lock:
            self._decisions[key] = (now + (ALLOW_TTL_SECONDS if allowed else DENY_TTL_SECONDS), allowed)
            _expire(self._decisions, now)
        return allowed


def _expire(cache: dict[Any, tuple[float, Any]], now: float) -> None:
    """Drop expired entries once the cache grows (bounded by the clients seen within a TTL)."""
    if len(cache) > 1024:
        for key in [k for k, (until, _) in cache.items() if until <= now]:
            del cache[key]


def guarded_app(
    registry: CollectorRegistry, authorizer: MetricsAuthorizer | None
) -> Callable[..., Iterable[bytes]]:
    """The WSGI app serving ``registry``; with ``authorizer``, only to requests it allows."""
    metrics = make_wsgi_app(registry)
    if authorizer is None:
        return metrics

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        denial = authorizer.check(
            environ.get("HTTP_AUTHORIZATION"),
            environ.get("PATH_INFO") or "/",
            environ.get("REQUEST_METHOD") or "GET",
        )
        if denial is None:
            served: Iterable[bytes] = metrics(environ, start_response)
            return served
        body = (denial.text + "\n").encode()
        start_response(
            f"{denial.status} {_REASONS[denial.status]}",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]

    return app


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    tls: ServingCertificate | None = None

    def get_request(self) -> tuple[Any, Any]:
        """The accepted connection, wrapped in TLS when :attr:`tls` is set; the handshake runs on
        the first read, in the request's own thread, so a slow client never blocks accepting."""
        sock, addr = super().get_request()
        if self.tls is None:
            return sock, addr
        return self.tls.context().wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that fails the TLS handshake (plain HTTP, say) or goes away: one debug line, not
        socketserver's traceback on stderr."""
        log.debug("metrics: request from %s failed", client_address, exc_info=True)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log line per scrape."""


def serve_metrics(
    port: int,
    addr: str,
    registry: CollectorRegistry,
    authorizer: MetricsAuthorizer | None,
    tls: ServingCertificate | None = None,
) -> WSGIServer:
    """Serve ``registry`` on ``https://addr:port/`` with ``tls`` (:mod:`trtllm_operator.kube.metrics_tls`),
    or ``http://`` without, from a daemon thread (``authorizer``: see :func:`guarded_app`). Returns the
    server (``shutdown()`` stops it)."""
    server = make_server(addr, port, guarded_app(registry, authorizer), _ThreadingServer, _QuietHandler)
    assert isinstance(server, _ThreadingServer)
    server.tls = tls
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
