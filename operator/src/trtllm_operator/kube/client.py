"""Dict-in, dict-out access to the API server over the official ``kubernetes`` client.

The rest of the operator speaks plain manifests (camelCase dicts, as ``render/`` produces them and
as ``kubectl get -o json`` shows them). :class:`Kube` maps a :class:`Resource` onto the typed
client method (``read_namespaced_job``, ``patch_namespaced_custom_object_status`` …) and converts
typed results back to dicts with ``ApiClient.sanitize_for_serialization``, so callers never see
client model classes.

Error handling follows the three 409 cases of docs/reference/local-control-plane.md §D5:

* create of a child with a deterministic name → :meth:`Kube.create_or_get` turns
  ``409 AlreadyExists`` into "already there" and returns the live object;
* writes never PUT; they PATCH (JSON merge patch) with an optional ``metadata.resourceVersion``
  precondition, which the API server answers with ``409 Conflict`` when stale
  (:func:`is_conflict`; :mod:`trtllm_operator.kube.status` retries on it);
* ``404`` on read is ``None``, not an exception.

Every write carries ``fieldManager``, one name for the whole operator (``Settings.field_manager``,
default ``trtllm-operator``), so ``metadata.managedFields`` shows which fields the operator owns.

The client is synchronous: kopf runs sync handlers in its thread pool.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client, config
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
from trtllm_operator.metrics.operator_metrics import API_ERRORS

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
    """An API resource: group ("" for core), version, plural, kind; ``method`` is the typed suffix.

    ``method`` is the snake-case suffix of the typed client methods (``config_map`` for
    ``read_namespaced_config_map``); None for custom resources (served by CustomObjectsApi).
    """

    group: str
    version: str
    plural: str
    kind: str
    method: str | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


CONFIG_MAP = Resource("", "v1", "configmaps", "ConfigMap", "config_map")
SECRET = Resource("", "v1", "secrets", "Secret", "secret")
POD = Resource("", "v1", "pods", "Pod", "pod")
SERVICE = Resource("", "v1", "services", "Service", "service")
NETWORK_POLICY = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", "network_policy")
PVC = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", "persistent_volume_claim")
EVENT = Resource("", "v1", "events", "Event", "event")
JOB = Resource("batch", "v1", "jobs", "Job", "job")
DEPLOYMENT = Resource("apps", "v1", "deployments", "Deployment", "deployment")
REPLICA_SET = Resource("apps", "v1", "replicasets", "ReplicaSet", "replica_set")
PDB = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", "pod_disruption_budget")
HPA = Resource(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", "horizontal_pod_autoscaler"
)
LWS = Resource(LWS_GROUP, LWS_VERSION, LWS_PLURAL, LWS_KIND)
SCALED_OBJECT = Resource(KEDA_GROUP, KEDA_VERSION, SCALED_OBJECT_PLURAL, SCALED_OBJECT_KIND)
INFERENCE_POOL = Resource(INFERENCE_GROUP, INFERENCE_VERSION, INFERENCE_POOL_PLURAL, INFERENCE_POOL_KIND)
LLM_ENGINE = Resource(GROUP, VERSION, ENGINE_PLURAL, ENGINE_KIND)
LLM_DEPLOYMENT = Resource(GROUP, VERSION, DEPLOYMENT_PLURAL, DEPLOYMENT_KIND)

_API_CLASSES: dict[str, Any] = {
    "": client.CoreV1Api,
    "batch": client.BatchV1Api,
    "apps": client.AppsV1Api,
    "autoscaling": client.AutoscalingV2Api,
    "policy": client.PolicyV1Api,
    "networking.k8s.io": client.NetworkingV1Api,
}


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


#: Connections the API client keeps open: one per thread of kopf's handler pool
#: (handlers.startup.HANDLER_THREADS); the client's default is 5 per CPU, so on a 2-core node urllib3
#: would open and discard extra connections under load ("Connection pool is full").
CONNECTIONS = 12


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
    """Thin dict-based facade over the typed client. Thread-safe (one urllib3 pool)."""

    def __init__(self, api_client: client.ApiClient, field_manager: str = OPERATOR) -> None:
        self.api_client = api_client
        self.field_manager = field_manager
        self._apis: dict[str, Any] = {}
        self._custom = client.CustomObjectsApi(api_client)

    # -- plumbing -----------------------------------------------------------------------------
    def _api(self, res: Resource) -> Any:
        api = self._apis.get(res.group)
        if api is None:
            api = self._apis[res.group] = _API_CLASSES[res.group](self.api_client)
        return api

    def _dict(self, obj: Any) -> dict[str, Any]:
        api_client: Any = self.api_client
        return cast(dict[str, Any], api_client.sanitize_for_serialization(obj))

    def _typed(self, verb: str, res: Resource, subresource: str | None = None) -> Any:
        suffix = f"_{subresource}" if subresource else ""
        return getattr(self._api(res), f"{verb}_namespaced_{res.method}{suffix}")

    # -- reads --------------------------------------------------------------------------------
    def get(
        self, res: Resource, namespace: str, name: str, *, subresource: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            if res.method is None:
                if subresource == "status":
                    obj = self._custom.get_namespaced_custom_object_status(
                        res.group, res.version, namespace, res.plural, name
                    )
                else:
                    obj = self._custom.get_namespaced_custom_object(
                        res.group, res.version, namespace, res.plural, name
                    )
                return cast(dict[str, Any], obj)
            return self._dict(self._typed("read", res, subresource)(name, namespace))
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
        label of a Secret an LLMEngine references. Core-group (typed) resources only.
        """
        try:
            raw = self._typed("read", res)(
                name, namespace, _headers={"Accept": METADATA_ONLY}, _preload_content=False
            )
        except ApiException as exc:
            _count("get", exc, expected=(404,))
            if exc.status == 404:
                return None
            raise
        doc = json.loads(raw.data)
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
        """Items in ``namespace`` (all namespaces when None), each with apiVersion/kind filled in."""
        kwargs: dict[str, Any] = {}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if field_selector:
            kwargs["field_selector"] = field_selector
        try:
            items = self._list(res, namespace, kwargs)
        except ApiException as exc:
            _count("list", exc)
            raise
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return items

    def _list(self, res: Resource, namespace: str | None, kwargs: dict[str, Any]) -> Manifests:
        if res.method is None:
            if namespace is None:
                raw = self._custom.list_cluster_custom_object(res.group, res.version, res.plural, **kwargs)
            else:
                raw = self._custom.list_namespaced_custom_object(
                    res.group, res.version, namespace, res.plural, **kwargs
                )
            items = cast(list[Manifest], cast(dict[str, Any], raw).get("items", []))
        else:
            api = self._api(res)
            if namespace is None:
                result = getattr(api, f"list_{res.method}_for_all_namespaces")(**kwargs)
            else:
                result = getattr(api, f"list_namespaced_{res.method}")(namespace, **kwargs)
            items = self._dict(result).get("items", [])
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
        get). Raises ApiException (counted as verb ``log``) when the kubelet has no log to give
        (pod not started, a node without a kubelet such as kwok's) or after ``timeout_seconds``."""
        kwargs: dict[str, Any] = {"tail_lines": tail_lines, "_request_timeout": timeout_seconds}
        if container:
            kwargs["container"] = container
        try:
            api: Any = self._api(POD)
            return str(api.read_namespaced_pod_log(name, namespace, **kwargs))
        except ApiException as exc:
            _count("log", exc)
            raise

    # -- writes -------------------------------------------------------------------------------
    def create(self, res: Resource, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create; raises ApiException (409 when the name is taken)."""
        try:
            return self._create(res, namespace, body)
        except ApiException as exc:
            _count("create", exc, expected=(409,))
            raise

    def _create(self, res: Resource, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if res.method is None:
            obj = self._custom.create_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, dict(body), field_manager=self.field_manager
            )
            return cast(dict[str, Any], obj)
        return self._dict(self._typed("create", res)(namespace, dict(body), field_manager=self.field_manager))

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
        the API server then answers 409 when the object changed since ``rv``.
        """
        try:
            return self._patch(res, namespace, name, body, subresource=subresource, content_type=content_type)
        except ApiException as exc:
            _count("patch", exc, expected=(409,))
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
        kwargs: dict[str, Any] = {"field_manager": self.field_manager, "_content_type": content_type}
        if res.method is None:
            if subresource == "status":
                fn = self._custom.patch_namespaced_custom_object_status
            elif subresource == "scale":
                fn = self._custom.patch_namespaced_custom_object_scale
            else:
                fn = self._custom.patch_namespaced_custom_object
            obj = fn(res.group, res.version, namespace, res.plural, name, payload, **kwargs)
            return cast(dict[str, Any], obj)
        return self._dict(self._typed("patch", res, subresource)(name, namespace, payload, **kwargs))

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
        body = client.V1DeleteOptions.model_validate(options)
        try:
            if res.method is None:
                self._custom.delete_namespaced_custom_object(
                    res.group, res.version, namespace, res.plural, name, body=body
                )
            else:
                self._typed("delete", res)(name, namespace, body=body)
        except ApiException as exc:
            _count("delete", exc, expected=(404, 409) if preconditions else (404,))
            if exc.status == 404:
                return False
            raise
        return True


class WriteNeeded(Exception):  # noqa: N818 - a signal, not an error
    """A :class:`ReadOnlyKube` was asked to write: the caller decided on a cached copy and must
    decide again on a fresh one before anything is written."""


class ReadOnlyKube(Kube):
    """A :class:`Kube` for a reconcile that decided on the watch-cached copy ``cached`` of its own
    object ``own`` (resource, namespace, name). It reads like its parent; a write goes through only
    once the cached copy is known to be the current object:

    * the status write of ``own`` conditional on the cached ``resourceVersion``: the API server
      accepts it only if the cached copy *is* the current object (same spec, same previous status,
      so the same transitions); Events after it;
    * any other write first reads ``own`` fresh (:meth:`confirm`): the same ``resourceVersion`` as
      the cached copy — every decision so far was made on the current object, and from then on this
      client writes like its parent (the same guarantee as a GET at the start, taken later);
      another one — :class:`WriteNeeded` (also recorded in :attr:`wanted`, so a caller that swallowed
      the exception still sees it), and the caller starts again on a fresh GET.

    So a reconcile that finds nothing to write costs no request for its object, one that only moves
    its status costs its PATCH, and one that writes children costs the GET it always cost — with
    the decisions computed once (:func:`trtllm_operator.handlers.plumbing.cache_first`)."""

    def __init__(self, parent: Kube, own: tuple[Resource, str, str], cached: Mapping[str, Any]) -> None:
        super().__init__(parent.api_client, parent.field_manager)
        self._apis = parent._apis
        self.own = own
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
            and version
            and version == self.version
        ):
            try:
                out = super().patch(
                    res, namespace, name, body, subresource=subresource, content_type=content_type
                )
            except ApiException as exc:
                if exc.status != 409:
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
