"""Dict-in, dict-out access to the API server over the official ``kubernetes`` client's generic calls.

The rest of the operator speaks plain manifests (camelCase dicts, as ``render/`` produces them and
as ``kubectl get -o json`` shows them). :class:`Kube` maps a :class:`Resource` onto its REST path
(``/apis/batch/v1/namespaces/{namespace}/jobs/{name}``) and sends the request through the client's
generic ``ApiClient.param_serialize`` + ``ApiClient.call_api`` (kubernetes-client/python 37.0.1,
``kubernetes/client/api_client.py``: the two calls every generated ``*Api`` method makes), so the
JSON the API server answers is the dict the caller gets. The typed API classes (``CoreV1Api`` …)
and their model classes are never imported: loading them cost the operator ≈ 96 MiB of its
resident memory (issue #20, benchmarks/RESULTS.md "What holds the memory");
tests/unit/test_kube_generic.py keeps them out.

Each request is built as the generated method for the same operation builds it (same client,
37.0.1, ``kubernetes/client/api/core_v1_api.py`` and ``custom_objects_api.py``): path parameters
quoted by ``param_serialize``, ``Accept: application/json``, the ``BearerToken`` auth setting,
``fieldManager`` as a query parameter, the body as JSON (``rest.py`` turns a JSON-patch content
type with a non-list body into a strategic merge patch, as before); a non-2xx answer raises
``ApiException.from_response`` — the same :class:`~kubernetes.client.exceptions.ApiException`
subclasses (``NotFoundException``, ``ConflictException`` …) the generated methods raise.

Error handling follows the three 409 cases of docs/reference/local-control-plane.md §D5:

* create of a child with a deterministic name → :meth:`Kube.create_or_get` turns
  ``409 AlreadyExists`` into "already there" and returns the live object;
* writes never PUT; they PATCH (JSON merge patch) with an optional ``metadata.resourceVersion``
  precondition, which the API server answers with ``409 Conflict`` when stale
  (:func:`is_conflict`), or as a JSON patch whose ``test`` operations guard the write, answered
  with ``422`` when one fails (:func:`is_patch_refused`; sent as Go writes JSON, :func:`go_json`);
  :mod:`trtllm_operator.kube.status` retries on both;
* ``404`` on read is ``None``, not an exception.

Every write carries ``fieldManager``, one name for the whole operator (``Settings.field_manager``,
default ``trtllm-operator``), so ``metadata.managedFields`` shows which fields the operator owns.

The client is synchronous: kopf runs sync handlers in its thread pool.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import urllib3
from kubernetes import client, config
from kubernetes.client import rest
from kubernetes.client.exceptions import ApiException

from trtllm_operator.api.wire import (
    DEPLOYMENT_KIND,
    DEPLOYMENT_PLURAL,
    ENGINE_KIND,
    ENGINE_PLURAL,
    GROUP,
    INFERENCE_GROUP,
    INFERENCE_POOL_KIND,
    INFERENCE_POOL_PLURAL,
    INFERENCE_VERSION,
    KEDA_GROUP,
    KEDA_VERSION,
    LWS_GROUP,
    LWS_KIND,
    LWS_PLURAL,
    LWS_VERSION,
    OPERATOR,
    SCALED_OBJECT_KIND,
    SCALED_OBJECT_PLURAL,
    VERSION,
)
from trtllm_operator.metrics.operator_metrics import API_ERRORS, STATUS_WRITE_REFUSALS

log = logging.getLogger(__name__)

#: A manifest as the API server returns it (camelCase keys).
Manifest = dict[str, Any]
Manifests = list[Manifest]
#: A JSON patch: a list of operations.
JsonPatch = list[dict[str, Any]]
_config: Any = config  # the kubernetes.config functions are untyped

MERGE_PATCH = "application/merge-patch+json"
#: Accept header for metadata-only reads (Kubernetes API concepts, "Receiving resources as metadata").
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True)
class Resource:
    """An API resource: group ("" for core), version, plural, kind; ``namespaced`` False for a
    cluster-scoped one (Node, CustomResourceDefinition, TokenReview)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, *, named: bool = False, subresource: str | None = None) -> str:
        """The REST path template (Kubernetes API concepts, "Resource URIs"): ``/api/v1`` for the
        core group, else ``/apis/<group>/<version>``; ``/namespaces/{namespace}`` for a namespaced
        resource unless ``namespace`` is None (a list across all namespaces); ``/{name}`` when
        ``named``; then the subresource. ``{namespace}`` and ``{name}`` are filled in (and quoted)
        by ``ApiClient.param_serialize``, as in the generated methods.

        Raises ValueError for a named path of a namespaced resource without a namespace."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            root += "/namespaces/{namespace}"
        elif self.namespaced and named:
            raise ValueError(f"{self.kind} is namespaced: a namespace is needed to address one by name")
        path = f"{root}/{self.plural}"
        if named:
            path += "/{name}"
        return f"{path}/{subresource}" if subresource else path


CONFIG_MAP = Resource("", "v1", "configmaps", "ConfigMap")
SECRET = Resource("", "v1", "secrets", "Secret")
POD = Resource("", "v1", "pods", "Pod")
SERVICE = Resource("", "v1", "services", "Service")
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
NETWORK_POLICY = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
PVC = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
EVENT = Resource("", "v1", "events", "Event")
JOB = Resource("batch", "v1", "jobs", "Job")
DEPLOYMENT = Resource("apps", "v1", "deployments", "Deployment")
REPLICA_SET = Resource("apps", "v1", "replicasets", "ReplicaSet")
PDB = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
HPA = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
CRD = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
API_SERVICE = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False)
TOKEN_REVIEW = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
SUBJECT_ACCESS_REVIEW = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
LWS = Resource(LWS_GROUP, LWS_VERSION, LWS_PLURAL, LWS_KIND)
SCALED_OBJECT = Resource(KEDA_GROUP, KEDA_VERSION, SCALED_OBJECT_PLURAL, SCALED_OBJECT_KIND)
INFERENCE_POOL = Resource(INFERENCE_GROUP, INFERENCE_VERSION, INFERENCE_POOL_PLURAL, INFERENCE_POOL_KIND)
LLM_ENGINE = Resource(GROUP, VERSION, ENGINE_PLURAL, ENGINE_KIND)
LLM_DEPLOYMENT = Resource(GROUP, VERSION, DEPLOYMENT_PLURAL, DEPLOYMENT_KIND)

#: The ``Accept`` header of every JSON request: the one the generated methods choose
#: (``ApiClient.select_header_accept`` takes the first JSON type of the operation's list).
JSON = "application/json"


def call(
    api_client: client.ApiClient,
    method: str,
    resource_path: str,
    path_params: Mapping[str, str] | None = None,
    *,
    query: Sequence[tuple[str, Any]] = (),
    body: Any = None,
    content_type: str | None = None,
    accept: str = JSON,
    timeout: float | None = None,
    raw: bytes | None = None,
) -> bytes:
    """One request through the client's generic API (kubernetes-client/python 37.0.1,
    ``kubernetes/client/api_client.py``: ``param_serialize`` builds the URL — quoting
    ``path_params`` into ``resource_path`` and ``query`` into the query string — adds the default
    headers and the ``BearerToken`` credentials; ``call_api`` sends it through ``rest.py``, which
    JSON-encodes ``body``): the response body, bytes.

    ``raw``: a body already encoded, sent as it is instead of ``body`` (:func:`_send_raw`).
    ``timeout``: seconds for the whole request (urllib3 ``Timeout(total=...)``), None for none.
    Raises :class:`~kubernetes.client.exceptions.ApiException` (the subclass for the status, as
    ``ApiException.from_response`` picks it) for a non-2xx answer, with ``status``, ``reason``,
    ``body`` (the response text) and ``headers`` set as the generated methods set them."""
    headers = {"Accept": accept}
    if content_type:
        headers["Content-Type"] = content_type
    api: Any = api_client  # the generic calls are untyped
    request = api.param_serialize(
        method=method,
        resource_path=resource_path,
        path_params=dict(path_params or {}),
        query_params=list(query),
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = (
        api.call_api(*request, _request_timeout=timeout)
        if raw is None
        else _send_raw(api, request, raw, timeout)
    )
    data = response.read()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    return cast(bytes, data)


def _send_raw(api: Any, request: Sequence[Any], raw: bytes, timeout: float | None) -> rest.RESTResponse:
    """Send the request ``param_serialize`` built, with the body ``raw`` as it is: what ``rest.py``
    ``RESTClientObject.request`` does with a ``str``/``bytes`` body (kubernetes-client/python
    37.0.1) — which it reaches only for a content type that is not JSON; for a JSON one it
    ``json.dumps`` the body again. Same pool, headers, timeout and error for a TLS failure."""
    method, url, headers = request[0], request[1], request[2]
    try:
        response = api.rest_client.pool_manager.request(
            method,
            url,
            body=raw,
            headers=headers,
            timeout=urllib3.Timeout(total=timeout) if timeout else None,
            preload_content=False,
        )
    except urllib3.exceptions.SSLError as exc:
        raise ApiException(status=0, reason=f"{type(exc).__name__}\n{exc}") from exc
    return rest.RESTResponse(response)


# ------------------------------------------------------------------------------ Go's JSON
#: The characters Go's ``encoding/json`` escapes in a string (go1.24 ``src/encoding/json/encode.go``
#: ``appendString`` with ``escapeHTML``, the ``json.Encoder`` default): ``"`` and ``\``; ``\b``,
#: ``\f``, ``\n``, ``\r``, ``\t`` by their short escapes (since go1.22); other bytes below 0x20
#: and ``<``, ``>``, ``&`` as ``\u00XX`` (lower-case hex); U+2028 and U+2029 as ``\u2028`` /
#: ``\u2029``. Everything else is written as UTF-8. (Lone surrogates, which Go never writes, are
#: escaped as Python escapes them.)
_GO_ESCAPED = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]')
_GO_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _go_string(value: str) -> str:
    return '"' + _GO_ESCAPED.sub(lambda m: _GO_SHORT.get(m[0], f"\\u{ord(m[0]):04x}"), value) + '"'


def _go_float(value: float) -> str:
    """A float64 as Go's ``encoding/json`` writes it (go1.24 ``encode.go`` ``floatEncoder``): the
    shortest digits that read back the same number (Python's ``repr`` finds the same digits), in
    positional form for 1e-6 <= |x| < 1e21 (``strconv`` format ``'f'``: ``100``, ``0.00001``,
    ``10000000000000000``) and in exponent form otherwise, ``e-07`` shortened to ``e-7``."""
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no JSON form")
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        return re.sub(r"e-0(\d)$", r"e-\1", repr(value))  # repr writes these in exponent form
    return format(Decimal(repr(value)).normalize(), "f")


def _go_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, Mapping):  # Go writes a map's keys sorted
        return "{" + ",".join(f"{_go_string(str(k))}:{_go_value(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_go_value(v) for v in value) + "]"
    raise TypeError(f"{type(value).__name__} has no JSON form")


def go_json(value: Any) -> bytes:
    """``value`` (JSON types) encoded byte for byte as the API server encodes the same value.

    Why it matters: a JSON patch's ``test`` compares a string, number or boolean of the object by its
    bytes (gopkg.in/evanphx/json-patch.v4 v4.12.0, the version k8s.io/apiserver v0.34.4 vendors:
    ``patch.go`` ``lazyNode.equal`` — ``bytes.Equal`` of the compacted leaves; objects key by key,
    arrays in order), and the API server applies the patch to the object as its JSON serializer
    wrote it (k8s.io/apiserver v0.34.4 ``pkg/endpoints/handlers/patch.go``
    ``jsonPatcher.applyPatchToCurrentObject``: ``runtime.Encode``; for a custom resource
    k8s.io/apimachinery v0.34.4 ``pkg/apis/meta/v1/unstructured/helpers.go``
    ``unstructuredJSONScheme.Encode``: ``json.NewEncoder(w).Encode``, Go's ``encoding/json``). Python's
    ``json.dumps`` writes ``"—"`` as ``"\\u2014"`` and ``1e-05`` where Go writes ``0.00001``: a
    test of such a value would fail on an unchanged object. A value the API server sent (and
    ``json.loads`` read) comes out as the server writes it."""
    return _go_value(value).encode()


def call_json(
    api_client: client.ApiClient,
    method: str,
    resource_path: str,
    path_params: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Any:
    """:func:`call`, its JSON answer decoded (dicts and lists, as the API server sent them; an empty
    answer is ``{}``)."""
    data = call(api_client, method, resource_path, path_params, **kwargs)
    return json.loads(data) if data.strip() else {}


def _count(verb: str, exc: ApiException, *, expected: tuple[int, ...] = ()) -> None:
    """Count an API error in ``trtllm_operator_api_errors_total`` unless its status is ``expected``
    (a 404 on get is an answer, a 409 on create-or-get is "already there")."""
    if exc.status not in expected:
        API_ERRORS.labels(verb=verb, code=str(exc.status)).inc()


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 404


def is_conflict(exc: BaseException) -> bool:
    """409: AlreadyExists on create, Conflict on a stale resourceVersion."""
    return isinstance(exc, ApiException) and exc.status == 409


#: The message of the 422 a JSON patch that does not apply to the object gets: a failed ``test``, or
#: a path it needs missing. k8s.io/apiserver v0.34.4 ``pkg/endpoints/handlers/patch.go``
#: ``applyJSPatch`` answers every error of ``Patch.Apply`` with ``errors.NewGenericServerResponse(
#: http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)``, which
#: (k8s.io/apimachinery v0.34.4 ``pkg/api/errors/errors.go``) sets reason ``Invalid``, this fixed
#: message and no causes — json-patch's own text is dropped. A validation error of the patched
#: object is ``NewInvalid``: the same reason and code, but a message naming the object and fields.
PATCH_NOT_APPLIED = "the server rejected our request due to an error in our request"


def is_patch_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the API server's answer to a JSON patch that did not apply to the current
    object (:data:`PATCH_NOT_APPLIED`): for a patch whose ``test`` operations guard a write, the
    object changed since the copy the patch was made from."""
    if not isinstance(exc, ApiException) or exc.status != 422:
        return False
    try:
        answer = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return False
    return isinstance(answer, dict) and answer.get("message") == PATCH_NOT_APPLIED


#: Connections the API client keeps open: one per thread of kopf's handler pool
#: (handlers.startup.HANDLER_THREADS); the client's default is 5 per CPU, so on a 2-core node urllib3
#: would open and discard extra connections under load ("Connection pool is full").
CONNECTIONS = 12


#: Delays (s) between retries of a failed API request, watch reconnects included (kopf's
#: ``settings.networking.error_backoffs``, set by handlers.startup; :func:`wait_for_api_server` waits
#: the same before kopf starts). kopf's default (1, 1, 2, 3, 5, 8, 13, 21) sleeps up to 21 s before the
#: next attempt, so after an API-server outage the operator noticed the API's return only 14 s later
#: (tests/integration/test_faults.py). Capped at 5 s, with about the same total (57 s) before a request
#: gives up.
API_ERROR_BACKOFFS = (1, 1, 2, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5)

#: Seconds one attempt of :func:`wait_for_api_server` may take (connect and answer).
REACHABLE_TIMEOUT = 10.0


class ApiServerUnreachableError(Exception):
    """No answer from the API server. ``str()``: ``cannot reach the API server URL (REASON)``, and
    `` after N attempts`` when there were several."""

    def __init__(self, server: str, reason: str, attempts: int = 1) -> None:
        tail = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"cannot reach the API server {server} ({reason}){tail}")
        self.server = server
        self.reason = reason
        self.attempts = attempts


def unreachable(
    api_client: client.ApiClient, exc: urllib3.exceptions.HTTPError, attempts: int = 1
) -> ApiServerUnreachableError:
    """:class:`ApiServerUnreachableError` for a request of ``api_client`` that got no HTTP answer: the
    reason is the operating system's (``connection refused``, ``Name or service not known``), found
    down urllib3's chain (``MaxRetryError.reason`` → ``NewConnectionError`` → its ``OSError``), else
    urllib3's own one-line text."""
    seen: BaseException | None = getattr(exc, "reason", None) or exc
    reason = ""
    while seen is not None and not reason:
        if isinstance(seen, OSError) and seen.strerror:
            reason = str(seen.strerror)
        seen = seen.__cause__ or seen.__context__
    if not reason:
        cause = getattr(exc, "reason", None) or exc
        reason = " ".join(str(cause).split()) or type(cause).__name__
    reason = reason[:1].lower() + reason[1:]
    return ApiServerUnreachableError(str(api_client.configuration.host), reason, attempts)


def wait_for_api_server(
    api_client: client.ApiClient,
    backoffs: Sequence[float],
    *,
    on_retry: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once the API server answers ``GET /version`` — any HTTP status is an answer (the
    credentials are kopf's concern, which reports a refusal itself) — trying ``len(backoffs) + 1``
    times, ``backoffs[i]`` seconds apart, as kopf retries a request whose connection fails (kopf
    1.45.2 ``kopf/_cogs/clients/api.py`` ``request``: ``settings.networking.error_backoffs``, then
    "escalating" it). ``on_retry``: told once, after the first failed attempt, what failed and how
    long the retries may take.

    Raises :class:`ApiServerUnreachableError` (server, reason, attempts) after the last attempt.
    ``trtllm-operator run`` calls it before kopf starts: kopf escalates the same failure from its
    first requests by failing its root tasks, each logged with its traceback, then ``kopf.run``
    re-raises it (``kopf/_core/reactor/running.py`` ``run_tasks``: ``aiotasks.reraise``) — about 250
    lines for an unreachable server (fresh-user trial 49 W2); this is one.
    """
    attempts = len(backoffs) + 1
    for attempt in range(1, attempts + 1):
        try:
            call(api_client, "GET", "/version", timeout=REACHABLE_TIMEOUT)
            return
        except ApiException:
            return  # an HTTP answer: the server is there
        except urllib3.exceptions.HTTPError as exc:
            if attempt == attempts:
                raise unreachable(api_client, exc, attempts) from exc
            if attempt == 1 and on_retry is not None:
                retries = f"retrying {attempts - 1} times over {sum(backoffs):g} s"
                on_retry(f"{unreachable(api_client, exc)}; {retries}")
        sleep(backoffs[attempt - 1])


def api_message(exc: ApiException) -> str:
    """The ``message`` of the API server's Status body (what ``kubectl`` prints for a refused write),
    else the raw body, else the HTTP reason or status."""
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or exc.body or exc.reason or exc.status)


def load_api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ApiClient from ``kubeconfig`` (or ``$KUBECONFIG`` / ``~/.kube/config``), else in-cluster."""
    configuration = client.Configuration()
    configuration.connection_pool_maxsize = CONNECTIONS
    try:
        _config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    except config.ConfigException:
        if kubeconfig is not None:
            raise
        _config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


class Kube:
    """Thin dict-based facade over the client's generic API. Thread-safe (one urllib3 pool)."""

    def __init__(self, api_client: client.ApiClient, field_manager: str = OPERATOR) -> None:
        self.api_client = api_client
        self.field_manager = field_manager

    # -- plumbing -----------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        res: Resource,
        namespace: str | None,
        name: str | None = None,
        *,
        subresource: str | None = None,
        **kwargs: Any,
    ) -> Any:
        params = {"namespace": namespace} if res.namespaced and namespace is not None else {}
        if name is not None:
            params["name"] = name
        path = res.path(namespace, named=name is not None, subresource=subresource)
        return call_json(self.api_client, method, path, params, **kwargs)

    # -- reads --------------------------------------------------------------------------------
    def get(
        self, res: Resource, namespace: str | None, name: str, *, subresource: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist (``namespace`` None for a cluster-scoped
        resource)."""
        try:
            return cast(dict[str, Any], self._call("GET", res, namespace, name, subresource=subresource))
        except ApiException as exc:
            _count("get", exc, expected=(404,))
            if exc.status == 404:
                return None
            raise

    def get_metadata(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        """Only the object's ``metadata`` (None when it does not exist), never its ``data`` or ``spec``.

        Asks the API server for ``PartialObjectMetadata`` (``Accept: application/json;as=
        PartialObjectMetadata;g=meta.k8s.io;v=v1``, Kubernetes API concepts "Receiving resources as
        metadata only"), so a Secret's values never reach the operator: used to check the opt-in
        label of a Secret an LLMEngine references.
        """
        try:
            doc = self._call("GET", res, namespace, name, accept=METADATA_ONLY)
        except ApiException as exc:
            _count("get", exc, expected=(404,))
            if exc.status == 404:
                return None
            raise
        if doc.get("kind") != "PartialObjectMetadata":  # never hand full content to the caller
            raise ApiException(status=0, reason=f"expected PartialObjectMetadata, got {doc.get('kind')!r}")
        return cast(dict[str, Any], doc.get("metadata") or {})

    def list(
        self,
        res: Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Manifests:
        """Items in ``namespace`` (all namespaces, or a cluster-scoped resource, when None), each
        with apiVersion/kind filled in (a list's items carry neither)."""
        query: list[tuple[str, str]] = []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if label_selector:
            query.append(("labelSelector", label_selector))
        try:
            raw = self._call("GET", res, namespace, query=query)
        except ApiException as exc:
            _count("list", exc)
            raise
        items = cast(Manifests, raw.get("items") or [])
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return items

    def pod_log(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        tail_lines: int = 20,
        timeout_seconds: float = 5.0,
    ) -> str:
        """The last ``tail_lines`` lines of a container's log (``GET pods/log``; RBAC ``pods/log``
        get), decoded as UTF-8 (an undecodable byte becomes U+FFFD). Raises ApiException (counted
        as verb ``log``) when the kubelet has no log to give (pod not started, a node without a
        kubelet such as kwok's) or after ``timeout_seconds``."""
        query: list[tuple[str, Any]] = [("container", container)] if container else []
        query.append(("tailLines", tail_lines))
        try:
            data = call(
                self.api_client,
                "GET",
                POD.path(namespace, named=True, subresource="log"),
                {"namespace": namespace, "name": name},
                query=query,
                timeout=timeout_seconds,
            )
        except ApiException as exc:
            _count("log", exc)
            raise
        return data.decode("utf-8", errors="replace")

    # -- writes -------------------------------------------------------------------------------
    def create(self, res: Resource, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create; raises ApiException (409 when the name is taken)."""
        try:
            return cast(
                dict[str, Any],
                self._call(
                    "POST", res, namespace, query=[("fieldManager", self.field_manager)], body=dict(body)
                ),
            )
        except ApiException as exc:
            _count("create", exc, expected=(409,))
            raise

    def create_or_get(
        self, res: Resource, namespace: str, body: Mapping[str, Any], *, read_first: bool = True
    ) -> tuple[dict[str, Any], bool]:
        """Create ``body`` unless an object with its name exists: ``(live object, created)``.

        A child's name is derived from its parent, so AlreadyExists means "done before" (a retry,
        a restarted operator, another parent with the same engine key). The existing object is
        returned unchanged; comparing and patching it is the caller's decision.

        Reads first: a settled object's every reconcile then costs one GET, not a rejected POST
        (409) and a GET — no write requests at all while nothing changes (benchmarks/scale.py).
        ``read_first=False``: the caller has just seen the object absent (in a watch cache), so the
        create goes first and a 409 costs the read.
        """
        name = body["metadata"]["name"]
        existing = self.get(res, namespace, name) if read_first else None
        if existing is not None:
            return existing, False
        try:
            return self.create(res, namespace, body), True
        except ApiException as exc:
            if exc.status != 409:
                raise
        existing = self.get(res, namespace, name)
        if existing is None:  # deleted between our create and read: try once more
            return self.create(res, namespace, body), True
        return existing, False

    def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: Mapping[str, Any] | JsonPatch,
        *,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
    ) -> dict[str, Any]:
        """PATCH (JSON merge patch by default; a list body needs ``content_type=JSON_PATCH``).

        Put ``{"metadata": {"resourceVersion": rv}}`` into a merge patch to make it conditional:
        the API server then answers 409 when the object changed since ``rv``. A guarded status write
        (:func:`is_guarded`) refused with 422 (:func:`is_patch_refused`) is an answer, counted in
        ``trtllm_operator_status_write_refusals_total`` by kind, not in the API errors.
        """
        try:
            return self._patch(res, namespace, name, body, subresource=subresource, content_type=content_type)
        except ApiException as exc:
            refused = is_patch_refused(exc)
            _count("patch", exc, expected=(409, 422) if refused else (409,))
            if refused and subresource == "status" and is_guarded(body, content_type):
                STATUS_WRITE_REFUSALS.labels(kind=res.kind).inc()
            raise

    def _patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: Mapping[str, Any] | JsonPatch,
        *,
        subresource: str | None,
        content_type: str,
    ) -> dict[str, Any]:
        payload: Any = body if isinstance(body, list) else dict(body)
        # A JSON patch goes out as Go writes JSON: its ``test`` operations compare bytes (go_json).
        raw = go_json(payload) if isinstance(payload, list) and content_type == JSON_PATCH else None
        return cast(
            dict[str, Any],
            self._call(
                "PATCH",
                res,
                namespace,
                name,
                subresource=subresource,
                query=[("fieldManager", self.field_manager)],
                body=None if raw is not None else payload,
                content_type=content_type,
                raw=raw,
            ),
        )

    def delete(
        self,
        res: Resource,
        namespace: str,
        name: str,
        *,
        propagation: str = "Background",
        preconditions: Mapping[str, str] | None = None,
    ) -> bool:
        """Delete; False when it was already gone.

        ``preconditions``: ``uid`` and/or ``resourceVersion`` the object must still have
        (``DeleteOptions.preconditions``, meta/v1): the API server answers 409 Conflict otherwise,
        which raises like any other error (the caller decides again on a fresh copy)."""
        options: dict[str, Any] = {"propagationPolicy": propagation}
        if preconditions:
            options["preconditions"] = dict(preconditions)
        try:
            self._call("DELETE", res, namespace, name, body=options)
        except ApiException as exc:
            _count("delete", exc, expected=(404, 409) if preconditions else (404,))
            if exc.status == 404:
                return False
            raise
        return True


#: The paths every guarded status write tests (kube/status.py ``status_guard``), besides
#: ``generation``, ``deletionTimestamp`` and the honoured annotations.
GUARDED_PATHS = ("/metadata/uid", "/status")


def is_guarded(body: Mapping[str, Any] | JsonPatch, content_type: str) -> bool:
    """Whether ``body`` is a JSON patch that tests the object's uid and its whole status before it
    writes (kube/status.py ``guarded_status_patch``): the API server applies it only to the object
    the writer decided on, as far as the decision read it."""
    if content_type != JSON_PATCH or not isinstance(body, list):
        return False
    tested = {op.get("path") for op in body if op.get("op") == "test"}
    return all(path in tested for path in GUARDED_PATHS)


class WriteNeeded(Exception):  # noqa: N818 - a signal, not an error
    """A :class:`ReadOnlyKube` was asked to write: the caller decided on a cached copy and must
    decide again on a fresh one before anything is written."""


class ReadOnlyKube(Kube):
    """A :class:`Kube` for a reconcile that decided on the watch-cached copy ``cached`` of its own
    object ``own`` (resource, namespace, name). It reads like its parent; a write goes through only
    once the cached copy is known to be the current object:

    * the status write of ``own`` guarded by the cached copy (:func:`is_guarded`, kube/status.py
      ``status_guard``: a JSON patch that tests uid, generation, deletion, the honoured annotations
      and the whole status) or conditional on its ``resourceVersion``: the API server accepts it
      only if the current object is the cached copy as far as the decision read it (same spec, same
      previous status, so the same transitions) — a bookkeeping PATCH of kopf's in between does not
      refuse it; Events after it. A refusal (422 or 409) raises :class:`WriteNeeded`;
    * any other write first reads ``own`` fresh (:meth:`confirm`): the same ``resourceVersion`` as
      the cached copy — every decision so far was made on the current object, and from then on this
      client writes like its parent (the same guarantee as a GET at the start, taken later);
      another one — :class:`WriteNeeded` (also recorded in :attr:`wanted`, so a caller that swallowed
      the exception still sees it), and the caller starts again on a fresh GET.

    So a reconcile that finds nothing to write costs no request for its object, one that only moves
    its status costs its PATCH, and one that writes children costs the GET it always cost — with
    the decisions computed once (:func:`trtllm_operator.handlers.plumbing.cache_first`)."""

    def __init__(
        self,
        parent: Kube,
        own: tuple[Resource, str, str],
        cached: Mapping[str, Any],
        *,
        on_fresh: Callable[[dict[str, Any] | None], None] | None = None,
    ) -> None:
        super().__init__(parent.api_client, parent.field_manager)
        self.own = own
        #: Called with ``own`` as :meth:`confirm` read it, at once: before any write it allows.
        self.on_fresh = on_fresh
        self.version = (cached.get("metadata") or {}).get("resourceVersion")
        self.wanted = False
        self.status_written = False
        #: ``own`` as read by :meth:`confirm` (None: not read).
        self.fresh: dict[str, Any] | None = None
        self.live = False

    def confirm(self) -> bool:
        """Whether the cached copy is the current object (read fresh once); from a True answer on,
        every write goes through. False marks :attr:`wanted`."""
        if not self.live and self.fresh is None and self.version:
            res, namespace, name = self.own
            self.fresh = self.get(res, namespace, name)
            if self.on_fresh is not None:
                self.on_fresh(self.fresh)
            self.live = (
                self.fresh is not None and self.fresh["metadata"].get("resourceVersion") == self.version
            )
        if not self.live:
            self.wanted = True
        return self.live

    def _refuse(self, verb: str, res: Resource, name: str) -> WriteNeeded:
        self.wanted = True
        return WriteNeeded(f"{verb} {res.kind} {name}: the cached {self.own[0].kind} is not current")

    def create(self, res: Resource, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if (res == EVENT and self.status_written) or self.confirm():
            return super().create(res, namespace, body)
        raise self._refuse("create", res, str((body.get("metadata") or {}).get("name")))

    def create_or_get(
        self, res: Resource, namespace: str, body: Mapping[str, Any], *, read_first: bool = True
    ) -> tuple[dict[str, Any], bool]:
        if self.confirm():
            return super().create_or_get(res, namespace, body, read_first=read_first)
        raise self._refuse("create", res, str((body.get("metadata") or {}).get("name")))

    def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: Mapping[str, Any] | JsonPatch,
        *,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
    ) -> dict[str, Any]:
        if self.live:
            return super().patch(
                res, namespace, name, body, subresource=subresource, content_type=content_type
            )
        version = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, Mapping) else None
        if (
            subresource == "status"
            and self.own == (res, namespace, name)
            and ((version and version == self.version) or is_guarded(body, content_type))
        ):
            try:
                out = super().patch(
                    res, namespace, name, body, subresource=subresource, content_type=content_type
                )
            except ApiException as exc:
                if exc.status != 409 and not is_patch_refused(exc):
                    raise
                raise self._refuse("patch", res, name) from exc  # the cached copy was not current
            self.status_written = True
            return out
        if self.confirm():
            return super().patch(
                res, namespace, name, body, subresource=subresource, content_type=content_type
            )
        raise self._refuse("patch", res, name)

    def delete(
        self,
        res: Resource,
        namespace: str,
        name: str,
        *,
        propagation: str = "Background",
        preconditions: Mapping[str, str] | None = None,
    ) -> bool:
        if self.confirm():
            return super().delete(res, namespace, name, propagation=propagation, preconditions=preconditions)
        raise self._refuse("delete", res, name)


_default: Kube | None = None
_default_lock = threading.Lock()


def default_kube(field_manager: str = OPERATOR) -> Kube:
    """The process-wide :class:`Kube` (created on first use from kubeconfig or in-cluster config)."""
    global _default  # noqa: PLW0603 - one client per process, like kopf's own login
    with _default_lock:
        if _default is None:
            _default = Kube(load_api_client(), field_manager)
        return _default


def set_default_kube(kube: Kube | None) -> None:
    """Replace the process-wide client (tests pointing at a fresh cluster; None resets)."""
    global _default  # noqa: PLW0603
    with _default_lock:
        _default = kube
