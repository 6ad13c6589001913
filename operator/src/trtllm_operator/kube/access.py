"""Whether the operator's credentials may read what kopf will watch, asked before kopf starts.

**Why.** kopf 1.45.2 treats a ``403 Forbidden`` like a failed connection: it retries the request on
its error backoffs ("During k8s upgrades, API might throw 403 Forbidden. Use retries for this error
as well.", ``kopf/_cogs/clients/api.py`` ``request``), logging each attempt, and then escalates: every
watcher of a forbidden resource fails its task with a traceback and ``kopf.run`` ends (the same path as
an unreachable server, :func:`trtllm_operator.kube.client.wait_for_api_server`). An operator started
with a token that authenticates but has no RBAC printed 1,144 lines so (fresh-user trial 51 Y11).
``trtllm-operator run`` asks first, with one ``SelfSubjectAccessReview`` per verb, resource and
namespace (authorization.k8s.io/v1, which every authenticated user may create: the bootstrap
ClusterRole ``system:basic-user``, kubernetes v1.34 ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/
policy.go``), and ends with one line naming what is missing.

**What is asked.** ``list`` and ``watch`` (kopf lists, then watches: ``kopf/_cogs/clients/watching.py``
``continuous_watch``) of every resource a handler watches — the caller passes kopf's watched
selectors (:func:`trtllm_operator.handlers.kopfsession.watched_selectors`) — in every watched namespace
for a namespaced resource, cluster-wide for a cluster-scoped one or a cluster-wide operator. Whether
a resource is namespaced comes from the API server's discovery (``GET /api/v1``,
``GET /apis/GROUP/VERSION``: ``APIResourceList`` ``resources[].namespaced``); a resource the server
does not serve is not asked about (kopf does not watch it either). Writes are not asked about: a
refused write is reported on the object it was for (its conditions and Events).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from trtllm_operator.kube.client import call_json

#: The verbs kopf needs of a resource it watches.
WATCH_VERBS = ("list", "watch")


@dataclass(frozen=True, order=True)
class Access:
    """One permission: ``verb`` on ``resource`` (the plural) of API ``group`` (``""``: the core
    group) in ``namespace`` (``""``: cluster-wide, every namespace)."""

    group: str
    resource: str
    namespace: str
    verb: str

    @property
    def qualified(self) -> str:
        """``resource.group`` as kubectl names it (``jobs.batch``; ``pods`` for the core group)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource


class AccessDeniedError(Exception):
    """The API server refuses some of what the operator needs. ``str()``: one line naming the identity
    (when the server says it), every missing permission grouped by namespace, and the fix."""

    def __init__(
        self, denied: Sequence[Access], user: str | None, attempts: int = 1, seconds: float = 0
    ) -> None:
        self.denied = tuple(sorted(denied))
        self.user = user
        who = f"user {user}" if user else "the operator's credentials"
        tail = f" (asked {attempts} times over {seconds:g} s)" if attempts > 1 else ""
        super().__init__(
            f"the API server does not allow {who} what the operator watches: {describe(self.denied)}{tail}. "
            "kopf would retry every watch and stop with tracebacks. Fix: the Helm chart's RBAC (rbac.create, "
            "the default) covers the namespaces of its watchNamespaces value, or every namespace with "
            "clusterWide: true: run with those (-n / --all-namespaces) or change the values; without the "
            "chart, grant every rule docs/security.md lists under least-privilege RBAC (these are only the "
            "ones watching needs; the operator also writes)"
        )


def credentials_refused(server: str, reason: str | None) -> str:
    """What to say when the API server answers 401: it does not accept the credentials at all (``run``
    before kopf, ``cache list`` / ``cache import``)."""
    return (
        f"the API server {server} does not accept the operator's credentials "
        f"(401 {reason or 'Unauthorized'}: the token or client certificate is invalid or has expired, "
        "e.g. a token of a deleted ServiceAccount); get new ones (kubectl create token SERVICEACCOUNT) "
        "or fix the kubeconfig"
    )


def describe(denied: Iterable[Access]) -> str:
    """``cluster-wide: list/watch nodes; in namespace ml: list/watch jobs.batch, pods and list
    services`` — each scope (cluster-wide first, then namespaces in order), in it the resources of each
    set of verbs."""
    by_scope: dict[str, dict[str, list[str]]] = {}
    for access in sorted(denied):
        verbs = by_scope.setdefault(access.namespace, {}).setdefault(access.qualified, [])
        if access.verb not in verbs:
            verbs.append(access.verb)
    parts = []
    for namespace, resources in sorted(by_scope.items()):
        grouped: dict[str, list[str]] = {}
        for resource, verbs in resources.items():
            grouped.setdefault("/".join(sorted(verbs)), []).append(resource)
        said = " and ".join(f"{verbs} {', '.join(sorted(names))}" for verbs, names in sorted(grouped.items()))
        parts.append(f"{f'in namespace {namespace}' if namespace else 'cluster-wide'}: {said}")
    return "; ".join(parts)


def wanted(
    watched: Iterable[tuple[str, str, str]],
    resolve: Callable[[str, str, str], tuple[str, bool] | None],
    namespaces: Collection[str],
) -> list[Access]:
    """The permissions kopf needs to watch ``watched`` — ``(group, version, name)``, ``name`` as a
    kopf selector gives it (plural, kind, singular or short name) — in ``namespaces`` (empty:
    cluster-wide). ``resolve(group, version, name)``: the resource's plural and whether it is
    namespaced, ``None`` when the server does not serve it (then nothing is asked for it). Sorted,
    each once."""
    out: set[Access] = set()
    scopes = sorted(set(namespaces)) or [""]
    for group, version, name in watched:
        found = resolve(group, version, name)
        if found is None:
            continue
        plural, scoped = found
        for namespace in scopes if scoped else [""]:
            out.update(Access(group, plural, namespace, verb) for verb in WATCH_VERBS)
    # No namespaces: kopf 1.45.2 lists and watches them only for a namespaced operator with scanning on
    # (kopf/_core/reactor/observation.py namespace_observer: "not settings.scanning.disabled and not
    # clusterwide"), and the operator scans only when cluster-wide (handlers.startup.configure_kopf).
    return sorted(out)


def discovery(api_client: client.ApiClient) -> Callable[[str, str, str], tuple[str, bool] | None]:
    """``resolve(group, version, name)`` for :func:`wanted` from the API server's discovery documents,
    one ``GET`` per group version, remembered. ``name`` matches a resource as a kopf selector's name
    does (kopf 1.45.2 ``kopf/_cogs/structs/references.py`` ``Selector.check``: ``any_name`` is the
    kind, plural, singular or a short name); the answer is its plural and ``namespaced``, or ``None``
    when the group version (404) or the resource is not served. Subresources (``pods/log``) are not
    watched and never match."""
    lists: dict[tuple[str, str], list[dict[str, object]]] = {}

    def resolve(group: str, version: str, name: str) -> tuple[str, bool] | None:
        key = (group, version)
        if key not in lists:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                document = call_json(api_client, "GET", path)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                document = {}
            lists[key] = [r for r in document.get("resources") or [] if "/" not in str(r.get("name"))]
        for r in lists[key]:
            shorts = r.get("shortNames")
            names = {
                r.get("name"),
                r.get("kind"),
                r.get("singularName"),
                *(shorts if isinstance(shorts, list) else []),
            }
            if name in names:
                return str(r.get("name")), bool(r.get("namespaced"))
        return None

    return resolve


def denied(api_client: client.ApiClient, wanted_access: Iterable[Access]) -> list[Access]:
    """Those of ``wanted_access`` the API server's authorizer does not allow the client's own identity:
    a ``SelfSubjectAccessReview`` each (``status.allowed``). Raises
    :class:`~kubernetes.client.exceptions.ApiException` when a review cannot be made."""
    out = []
    for access in wanted_access:
        attributes = {"verb": access.verb, "group": access.group, "resource": access.resource}
        if access.namespace:
            attributes["namespace"] = access.namespace
        review = call_json(
            api_client,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes},
            },
        )
        if not (review.get("status") or {}).get("allowed"):
            out.append(access)
    return out


def whoami(api_client: client.ApiClient) -> str | None:
    """The client's user name as the API server authenticates it (``SelfSubjectReview``,
    authentication.k8s.io/v1, GA in Kubernetes 1.28: ``kubectl auth whoami``), ``None`` when the server
    does not answer it."""
    try:
        review = call_json(
            api_client,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    except (ApiException, json.JSONDecodeError):
        return None
    name = ((review.get("status") or {}).get("userInfo") or {}).get("username")
    return str(name) if name else None


def wait_for_access(
    api_client: client.ApiClient,
    wanted_access: Sequence[Access],
    backoffs: Sequence[float],
    *,
    on_retry: Callable[[str], None] | None = None,
    sleep: Callable[[float], None],
) -> None:
    """Return once every permission of ``wanted_access`` is allowed, asking ``len(backoffs) + 1`` times,
    ``backoffs[i]`` seconds apart — the schedule kopf retries a refused request with, since a binding
    applied with the operator (a Helm install) reaches the authorizer's cache a moment later.
    Each attempt asks again only what the last one refused. ``on_retry``: told once, after the first
    refusal, what is missing. Raises
    :class:`AccessDeniedError` after the last attempt, and
    :class:`~kubernetes.client.exceptions.ApiException` when a review cannot be made."""
    attempts = len(backoffs) + 1
    missing = list(wanted_access)
    for attempt in range(1, attempts + 1):
        missing = denied(api_client, missing)  # again: only what was refused
        if not missing:
            return
        if attempt == attempts:
            raise AccessDeniedError(missing, whoami(api_client), attempts, sum(backoffs))
        if attempt == 1 and on_retry is not None:
            on_retry(
                f"the API server does not (yet) allow {describe(missing)}; asking again {attempts - 1} "
                f"time{'s' if attempts > 2 else ''} over {sum(backoffs):g} s (a new RoleBinding takes a "
                "moment to apply)"
            )
        sleep(backoffs[attempt - 1])
