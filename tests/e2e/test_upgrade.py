"""Upgrade safety: the previous release installed with live objects, upgraded to this tree's CRDs and
chart as docs/install.md ("Upgrade") says; nothing is rebuilt, restarted or rewritten unless the
upgrade requires it, and what it requires is listed here (``EXPECTED``), not ignored.

The module runs twice, once from each base of support/releases.py (a commit of main: the project has
no release tags), taken from this repository's own history with ``git archive`` and run from its own
virtualenv (its hack/venv.sh): its CRDs, its chart, its operator code.

- ``from-previous-release``: ``PREVIOUS_RELEASE``, the last release, bumped at each release
  (docs/install.md, "Upgrade tests"). ``EXPECTED`` lists what the areas in which this tree differs
  from it (``differs``, checked here and by tests/unit/test_releases.py) require: with its chart and
  CRDs this tree's, no Job, no new ReplicaSet, the same serving pods (UIDs), no child write; a code
  change adds one status write per object (the new ``status.reconciledBy``).
- ``across-the-key-migration``: ``KEY_MIGRATION`` (3898a0c), before engine-key/v2 and issue 24's
  renders: every engine is rebuilt once and every deployment rolls, each change listed.

Flow (once per base, the ``upgraded`` fixture; each test compares one kind of change with
``EXPECTED``; the session cluster's CRDs are the previous release's while it runs, and this tree's
again afterwards, whatever happens):

1. the previous release's CRDs (as its ``helm install`` created them: field manager ``helm``) and
   chart with that release's own test values (its e2e_harness.helm_values: its chart's schema
   rejects keys it does not know), its operator running as the chart's ServiceAccount
   (e2e_harness.start_operator);
2. live objects: two LLMEngines served from the engine cache (entries recorded by the previous
   release's own code, as ``cache import`` records them; no build) — one with every build limit
   set, one leaving them to the planner, both with a calibration both releases accept — and an
   LLMDeployment of each (2 and 1 replicas), Ready; and a third engine on the previous CRD's
   calibration defaults (``LEGACY``, cached, not served; see its test);
3. the upgrade: the old operator stops (the chart's ``Recreate``), ``kubectl apply --server-side
   --force-conflicts -f crds/`` of this tree (without ``--force-conflicts`` the apply fails on the
   fields ``helm`` manages), ``helm upgrade --reset-then-reuse-values`` of this tree's chart with
   the ``--set`` values EXPECTED names (across the key migration: this release's new setting
   ``settings.hfEndpoint`` at the local Hub, and ``--reuse-values`` and a value the chart no longer
   has refused, naming the fix), the new operator started from the upgraded Deployment;
4. after the new operator has resumed every object and settled: what changed, compared with what
   ``EXPECTED`` says must change — builder Jobs, serving pods (UIDs, pod-template hashes), the
   operator's writes in the workload namespace (the API server's audit log, by the ServiceAccount's
   user), the LLMEngine/LLMDeployment statuses and specs, and the chart's rendered objects.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_harness import (
    CHART,
    HF_TOKEN,
    REPO_ROOT,
    Installed,
    release_tree,
    start_operator,
)
from support.api import Api
from support.cluster import WRITE_VERBS, LocalCluster
from support.hub import LocalHub
from support.manifests import TINYLLAMA, an_engine, create_token_secret, hf_config, success_report
from support.releases import BASES, KEY_MIGRATION, PREVIOUS_RELEASE, Base, differing_areas
from support.wait import wait_for

from trtllm_operator.api import DEPLOYMENT_PLURAL, ENGINE_PLURAL, GROUP, VERSION
from trtllm_operator.api.wire import LABEL_ENGINE_KEY
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine

pytestmark = pytest.mark.slow

RELEASE = "upg"
KOPF_DIFFBASE = "kopf.trtllm-operator.dev/last-handled-configuration"
#: The serving fleet: LLMDeployment → (LLMEngine, replicas).
FLEET = {"d-fixed": ("fixed", 2), "d-derived": ("derived", 1)}

#: What the upgrade from KEY_MIGRATION (3898a0c) to this tree must change, and why. Everything
#: not named here must stay as it was.
ACROSS_THE_KEY_MIGRATION: dict[str, Any] = {
    # docs/install.md "Upgrade": engine key schema engine-key/v2 (issue 26) changes every key once,
    # and the default-maxSeqLen rule adds build.derived_limits to specs that leave a limit unset.
    # So every engine is rebuilt once (one builder Job each, for its new key; LEGACY too, with this
    # release's default calibration) and every LLMDeployment rolls to it. False at a bump without a
    # key change: then no Job, and engine statuses as they were.
    "engine_keys_change": True,
    # Paths of the serving Deployment's pod template that change (render/deployment.py): with the
    # new key (its label, annotation and ENGINE_KEY, the model repository ConfigMap named and hashed
    # by it) and the new artifact's size (the startup budget, startup_budget_seconds; the S3 emptyDir
    # sized from it), and between the releases' renders: the fetch-artifact init container verifies
    # the artifact against its manifest (issue 24 item 4) and the ConfigMap carries the verifier;
    # Triton's restricted admin APIs (issue 24 item 5): TRITON_ADMIN_KEY from the deployment's
    # credentials Secret (the launch flags themselves are in the ConfigMap: config-hash).
    "serving_template": [
        ".metadata.annotations.llm.trtllm-operator.dev/config-hash",
        ".metadata.annotations.llm.trtllm-operator.dev/engine-key",
        ".metadata.labels.llm.trtllm-operator.dev/engine-key",
        ".spec.containers[triton].env[ENGINE_KEY].value",
        ".spec.containers[triton].env[TRITON_ADMIN_KEY]",
        ".spec.containers[triton].startupProbe.failureThreshold",
        ".spec.initContainers[fetch-artifact].command",
        ".spec.volumes[artifact].emptyDir.sizeLimit",
        ".spec.volumes[config].configMap.items",
        ".spec.volumes[config].configMap.name",
    ],
    # Spec paths that read back differently without anyone writing them: the API server applies the
    # new CRD's defaults when it reads a stored object (structural schema defaulting).
    "spec_read_back": {},
    # Status fields the rebuild rewrites (engine) and the roll rewrites (deployment); any other
    # status field must read as before. The rebuilt artifact lies under ``artifact_root``.
    # ``reconciledBy``: the release that last reconciled the object (handlers/release.py, #20): new
    # in this release, and every release stamps the objects it reconciles.
    "engine_status": {
        "reconciledBy",
        "engineKey",
        "engineKeyShort",
        "artifact",
        "build",
        "conditions",
        "plan",
        "observedGeneration",
    },
    "deployment_status": {"engineKey", "conditions", "observedGeneration", "updatedReplicas", "reconciledBy"},
    # Successful PATCHes of each object itself (not status), all kopf's finalizer
    # ``kopf.zalando.org/KopfFinalizerMarker`` (docs/reliability.md, "kopf's writes", #20 scale2): the
    # previous release put it on every object (a kopf timer per object); this one has none on a plain
    # object, so its first start removes it once per object; a running build has a progress timer, so
    # the rebuild adds it at the build's start and removes it at its end: 3 per engine with a key
    # change, 1 per LLMDeployment. A 422 (kopf's resourceVersion test raced a status write) is retried
    # and not counted. Afterwards no object carries it.
    "object_patches": {"llmengines": 3, "llmdeployments": 1},
    # Where a rebuilt engine's artifact lies (status.artifact.uri, before its key): S3 artifact roots
    # end in the engine's namespace since issue 24 (decide/storage.py, StorageLocation.artifact_root);
    # the previous release's were the bare bucket/prefix of the spec (an_engine: s3://engines/cache).
    "artifact_root": "s3://engines/cache/{namespace}",
    # Chart objects whose rendering differs between the two releases (helm template of each chart
    # with the values the release has: the previous release's, then those plus the upgrade's --set):
    # - the operator Deployment: TRTLLM_OPERATOR_HF_CONFIG_FETCH (settings.hfConfigFetch, issue 25),
    #   TRTLLM_OPERATOR_HF_ENDPOINT (the --set settings.hfEndpoint, issue 25) and
    #   TRTLLM_OPERATOR_METRICS_AUTH (metrics.auth, authenticated operator metrics, issue 24),
    #   TRTLLM_OPERATOR_METRICS_SECURE (metrics.secure, the operator metrics over HTTPS, issue 24),
    # - the cluster-scoped ClusterRole: nodes list → list, watch (the nodes' watch cache, #20), and
    #   create on tokenreviews and subjectaccessreviews (metrics.auth's TokenReview +
    #   SubjectAccessReview, issue 24);
    # - a new ClusterRole ``-metrics-reader`` (get on the /metrics non-resource URL, issue 24);
    #   and TRTLLM_OPERATOR_SERVING_NETWORK_POLICY / _SERVING_MONITORING_NAMESPACES (the operator's
    #   per-deployment NetworkPolicy, servingNetworkPolicy, issue 24 item 5);
    # - the watched namespace's Role: only the verbs the code uses (issue 24, "minimal verbs": no
    #   pods get, no configmaps update, events create on the core group only), and secrets create
    #   and networkpolicies get/create/patch/delete (issue 24 item 5);
    # - the chart's own serving NetworkPolicy ``trtllm-serving`` is gone (the operator renders one
    #   per LLMDeployment instead, issue 24 item 5).
    # The namespaced chart default (clusterWide: false, issue 24) changes nothing here: the release
    # names its watchNamespaces.
    # - cluster-scoped names carry the release's namespace (``{release_namespace}``: two releases of
    #   one name in different namespaces collided on them; _helpers.tpl clusterScopedName): the
    #   previous ClusterRole and ClusterRoleBinding ``upg-trtllm-operator-cluster`` are gone (Helm
    #   deletes them after creating the new ones), ``{release_namespace}-upg-trtllm-operator-cluster``
    #   (both kinds) and ``-metrics-reader`` are new (so the rule changes above show up there).
    "chart_objects": {
        "Deployment/upg-trtllm-operator",
        "ClusterRole/upg-trtllm-operator-cluster",
        "ClusterRoleBinding/upg-trtllm-operator-cluster",
        "ClusterRole/{release_namespace}-upg-trtllm-operator-cluster",
        "ClusterRoleBinding/{release_namespace}-upg-trtllm-operator-cluster",
        "ClusterRole/{release_namespace}-upg-trtllm-operator-metrics-reader",
        "Role/upg-trtllm-operator",
        "NetworkPolicy/trtllm-serving",
        # new in this release: the chart's engineInUseWarning (default on), a ValidatingAdmissionPolicy
        # with validationActions [Warn] on deleting an LLMEngine whose status.usedBy lists deployments
        "ValidatingAdmissionPolicy/{release_namespace}-upg-trtllm-operator-engine-in-use",
        "ValidatingAdmissionPolicyBinding/{release_namespace}-upg-trtllm-operator-engine-in-use",
    },
    # Rollouts of each serving Deployment (new ReplicaSets): one as soon as the new operator renders
    # the pod template its way (the verifier, with the old key), one when the rebuilt engine is Ready
    # (the new key). The first could wait for the rebuild; it does not today. 0: pods keep their UIDs.
    "serving_rolls": 2,
    # Every (verb, resource, subresource) the new operator writes in the workload namespace (audit
    # log, by its ServiceAccount): the rebuild (Job, its build-spec ConfigMap, the new key's cache
    # entry, engine status) and the rollouts (model repository ConfigMaps, Deployments, deployment
    # status); and, from issue 24 item 5, per LLMDeployment: its credentials Secret (Triton admin key),
    # its NetworkPolicy, and its Service without the metrics port (client ports only); and kopf's
    # finalizer patches of the objects themselves (``object_patches``); the rebuilt engine's Job
    # gets its ttlSecondsAfterFinished once its artifact is recorded (builder Jobs that are no
    # longer needed, #24). Nothing else — no PodDisruptionBudget or spec write, no delete.
    "operator_writes": {
        ("patch", "llmengines", ""),
        ("patch", "llmdeployments", ""),
        ("create", "secrets", ""),
        ("create", "networkpolicies", ""),
        ("patch", "services", ""),
        ("patch", "llmengines", "status"),
        ("patch", "llmdeployments", "status"),
        ("create", "jobs", ""),
        ("patch", "jobs", ""),
        ("create", "configmaps", ""),
        ("patch", "deployments", ""),
    },
    # The previous release's artifact root (status.artifact.uri of its cache entries, before the key).
    "previous_artifact_root": "s3://engines/cache",
    # How the previous release is installed and upgraded (``{namespace}``: the watched one; ``{hub}``:
    # the local Hub's URL): its test values lack this release's settings.hfEndpoint, given at the
    # upgrade; the previous docs/security.md had users set servingNetworkPolicy.namespaces (here:
    # its default, the watched namespace, so the previous render is the same); this chart has no
    # such value and refuses it until it is removed (``kept_value_refused``), and refuses
    # --reuse-values (the previous chart's defaults lack settings.hfConfigFetch).
    "old_sets": ("servingNetworkPolicy.namespaces={{{namespace}}}",),
    "new_sets": ("settings.hfEndpoint={hub}", "servingNetworkPolicy.namespaces=null"),
    "reuse_values_refused": True,
    "kept_value_refused": "--set servingNetworkPolicy.namespaces=null",
    # What the previous CRD stored in LEGACY, created without calibration (git show
    # 3898a0c:crds/llm.trtllm-operator.dev_llmengines.yaml): its default, which this release refuses.
    "legacy_calibration": {"dataset": "bundled", "numSamples": 512, "batchSize": 1, "maxSeqLength": 512},
}

#: What the upgrade from PREVIOUS_RELEASE to this tree must change. ``PREVIOUS_RELEASE.differs`` is
#: ``{"code", "chart", "crds"}`` (the fixture and tests/unit/test_releases.py check it): the
#: LLMDeployment CRD (in crds/ and the chart's crds/, which helm does not render) gained three optional
#: fields without defaults and a CEL rule on them (spec.autoscaling.capacity's token weighting), and
#: the LLMEngine CRD's two format × backend refusals say the planner's words; so these objects, which
#: set neither, read back unchanged and render the same children; the
#: operator's code changed in what they do not exercise (the capacity recommendation's token
#: weighting, the simulator). So the new operator derives the same keys (checked against both trees'
#: derivations in test_engine_keys_move_only_with_a_key_migration) and renders the same children, but
#: its ``status.reconciledBy`` stamp differs (handlers/release.py: a digest of the operator's and
#: builder's sources), so its resume reconciles every object once and writes that stamp: one status
#: PATCH per LLMEngine and LLMDeployment, nothing else — no Job, no roll, no child write, no spec
#: change, the same chart render. When ``differs`` changes, this lists what the change requires (the
#: next bump resets both: docs/install.md, "Upgrade tests").
FROM_THE_PREVIOUS_RELEASE: dict[str, Any] = {
    "engine_keys_change": False,
    "serving_template": [],
    "spec_read_back": {},
    # the new release's stamp, written once per object (handlers/release.py)
    "engine_status": {"reconciledBy"},
    "deployment_status": {"reconciledBy"},
    "object_patches": {},
    # the artifacts stay where the previous release's cache entries put them (no rebuild)
    "artifact_root": "s3://engines/cache",
    "chart_objects": set(),
    "serving_rolls": 0,
    # the stamp's status PATCHes, and nothing else
    "operator_writes": {("patch", "llmengines", "status"), ("patch", "llmdeployments", "status")},
    "previous_artifact_root": "s3://engines/cache",
    # the previous release's test values already set settings.hfEndpoint; nothing to set or remove,
    # and the same chart's defaults: neither refusal of the migration applies
    "old_sets": (),
    "new_sets": (),
    "reuse_values_refused": False,
    "kept_value_refused": None,
    # LEGACY, created under the previous release, stores no calibration default (that CRD has none)
    "legacy_calibration": None,
}

EXPECTED: dict[str, dict[str, Any]] = {
    PREVIOUS_RELEASE.name: FROM_THE_PREVIOUS_RELEASE,
    KEY_MIGRATION.name: ACROSS_THE_KEY_MIGRATION,
}

#: Run by the previous release's interpreter: record an engine-cache entry for each engine with that
#: release's own test helper (its ``trtllm-operator cache import`` record); prints name → key.
_OLD_CACHE_IMPORT = """
import json, sys
from kubernetes import client, config
from support.artifacts import cache_artifact
core = client.CoreV1Api(config.new_client_from_config(config_file=sys.argv[1]))
bodies = json.loads(sys.argv[3])
print(json.dumps({b["metadata"]["name"]: cache_artifact(core, sys.argv[2], b).key for b in bodies}))
"""

#: Run by the previous release's interpreter: that release's own test values (its e2e_harness), which
#: its chart's schema accepts (it rejects unknown keys such as this tree's ``settings.hfEndpoint``).
_OLD_VALUES = """
import inspect, sys
from e2e_harness import helm_values
print(helm_values(*sys.argv[1:1 + len(inspect.signature(helm_values).parameters)]))
"""


#: Calibration both releases accept: the bundled text holds 101 samples (engine_builder
#: calibration data); the previous release's CRD defaulted ``numSamples`` to 512, which this one refuses
#: with the bundled text (see LEGACY).
CALIBRATION = {"dataset": "bundled", "numSamples": 101}
#: An engine left to the previous release's calibration defaults, cached and not served (see
#: test_engine_on_the_previous_releases_defaults_survives_the_upgrade).
LEGACY = "legacy"


def engines(api: Api) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The LLMEngines, and THIS tree's key for each (the spec as the previous release's CRD stores it,
    its defaults filled in: a server-side dry run of the create). kwok's builder pods report the build
    of that key — the rebuild a key change causes; the previous release never builds (its keys are in
    the cache)."""
    fixed = an_engine("fixed").limits(maxBatchSize=16, maxNumTokens=4096, maxSeqLen=2048)
    derived = an_engine("derived")
    for e in (fixed, derived):
        e.body["spec"]["quantization"]["calibration"] = dict(CALIBRATION)
    out, keys = {}, {}
    for e in (fixed, derived, an_engine(LEGACY)):
        stored = api.custom.create_namespaced_custom_object(
            GROUP, VERSION, api.ns, ENGINE_PLURAL, e.manifest(), dry_run="All"
        )
        prepared = prepare_engine(e.name, stored["spec"], hf_config=hf_config(TINYLLAMA))
        assert isinstance(prepared, PreparedEngine), prepared
        # manifest(ns): the report names the artifact under this tree's namespaced S3 root
        out[e.name] = e.succeeds(success_report(prepared)).runs_for(300).manifest(api.ns)
        keys[e.name] = prepared.key
    return out, keys


def ready(api: Api, keys: dict[str, str]) -> bool:
    """Every engine Ready on ``keys[name]``, every deployment Ready on its engine's key, all replicas."""
    for name, key in keys.items():
        s = api.get(ENGINE_PLURAL, name).get("status") or {}
        if s.get("phase") != "Ready" or s.get("engineKey") != key:
            return False
    for dep, (eng, replicas) in FLEET.items():
        s = api.get(DEPLOYMENT_PLURAL, dep).get("status") or {}
        if s.get("phase") != "Ready" or s.get("engineKey") != keys[eng] or s.get("readyReplicas") != replicas:
            return False
        pods = api.core.list_namespaced_pod(api.ns, label_selector=f"{GROUP}/deployment={dep}").items
        if len([p for p in pods if p.metadata.deletion_timestamp is None]) != replicas:
            return False  # a roll's old pods still terminating
    return all(KOPF_DIFFBASE in (o["metadata"].get("annotations") or {}) for o in api.items(ENGINE_PLURAL))


@dataclass
class Upgraded:
    """What the flow saw: before and after the upgrade, and the writes in between."""

    base: Base
    expected: dict[str, Any]  # EXPECTED[base.name]
    api: Api
    operator_namespace: str  # the release's namespace
    service_account_user: str
    old_keys: dict[str, str]
    derived_keys: dict[str, str]  # this tree's derivation for each stored spec (engines())
    keys: dict[str, str]
    before: dict[str, Any]
    after: dict[str, Any]
    events: list[dict[str, Any]]
    log: str
    old_render: dict[str, Any]
    new_render: dict[str, Any]
    served: set[str] = field(default_factory=set)


def snapshot(api: Api) -> dict[str, Any]:
    """What must not change unless EXPECTED says so."""
    live = [p for p in api.core.list_namespaced_pod(api.ns).items if p.metadata.deletion_timestamp is None]
    serving = {
        p.metadata.uid: (p.metadata.labels or {}).get("pod-template-hash")
        for p in live
        if f"{GROUP}/deployment" in (p.metadata.labels or {})
    }
    return {
        "jobs": sorted(j.metadata.name for j in api.batch.list_namespaced_job(api.ns).items),
        "templates": {
            d.metadata.name: api.apps.api_client.sanitize_for_serialization(d.spec.template)
            for d in api.apps.list_namespaced_deployment(api.ns).items
        },
        "serving_pods": serving,
        "children": {
            f"{kind}/{o.metadata.name}": (o.metadata.uid, o.metadata.resource_version)
            for kind, objs in (
                ("Deployment", api.apps.list_namespaced_deployment(api.ns).items),
                ("Service", api.core.list_namespaced_service(api.ns).items),
                ("ConfigMap", api.core.list_namespaced_config_map(api.ns).items),
            )
            for o in objs
        },
        "engines": {o["metadata"]["name"]: o for o in api.items(ENGINE_PLURAL)},
        "deployments": {o["metadata"]["name"]: o for o in api.items(DEPLOYMENT_PLURAL)},
    }


def diff_paths(a: Any, b: Any, path: str = "") -> set[str]:
    """Dotted paths where ``a`` and ``b`` differ (lists of named items matched by ``name``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {p for k in a.keys() | b.keys() for p in diff_paths(a.get(k), b.get(k), f"{path}.{k}")}
    named = (
        isinstance(a, list)
        and isinstance(b, list)
        and all(isinstance(i, dict) and "name" in i for i in a + b)
    )
    if named:
        left, right = {i["name"]: i for i in a}, {i["name"]: i for i in b}
        return {
            p
            for k in left.keys() | right.keys()
            for p in diff_paths(left.get(k), right.get(k), f"{path}[{k}]")
        }
    return set() if a == b else {path}


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def rendered(cluster: LocalCluster, chart: Path, namespace: str, values: str, *sets: str) -> dict[str, Any]:
    """``helm template`` of ``chart`` with ``values`` and ``--set`` ``sets``: 'Kind/name' → object."""
    out = cluster.helm(
        "template", RELEASE, str(chart), "--namespace", namespace, "--kube-version", "1.34.4",
        "--values", "-", *(a for kv in sets for a in ("--set", kv)), input=values,
    ).stdout  # fmt: skip
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in yaml.safe_load_all(out) if o}


@pytest.fixture(scope="module", params=BASES, ids=[b.name for b in BASES])
def base(request: pytest.FixtureRequest) -> Base:
    """The release the module upgrades from (each in turn)."""
    b: Base = request.param
    return b


@pytest.fixture(scope="module")
def upgrade_namespaces(cluster: LocalCluster, base: Base) -> Iterator[tuple[str, str]]:
    """The operator's namespace and the watched one (per base); this tree's CRDs restored afterwards."""
    op_ns, ns = cluster.create_namespace("upg-op"), cluster.create_namespace("upg")
    try:
        yield op_ns, ns
    finally:
        cluster.helm("uninstall", RELEASE, "--namespace", op_ns, "--timeout", "60s", check=False, timeout=90)
        for name in (ns, op_ns):
            cluster.delete_namespace(name)
        cluster.control_plane.apply_crds()


@pytest.fixture(scope="module")
def upgraded(
    cluster: LocalCluster,
    hub: LocalHub,
    base: Base,
    upgrade_namespaces: tuple[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Upgraded:
    """The flow of the module docstring, once per base."""
    expected = EXPECTED[base.name]
    differs = differing_areas(base.commit)
    assert differs == base.differs, (
        f"this tree differs from {base.name} ({base.commit[:7]}) in {sorted(differs)}, not "
        f"{sorted(base.differs)}: say in EXPECTED what the change requires (docs/install.md, Upgrade tests)"
    )
    op_ns, ns = upgrade_namespaces
    tmp_path = tmp_path_factory.mktemp("upgrade")
    previous = release_tree(base.commit, tmp_path / "previous")
    old_python = str(previous / ".venv" / "bin" / "python")
    old_values = subprocess.run(
        [old_python, "-c", _OLD_VALUES, ns, hub.url],
        env={**os.environ, "PYTHONPATH": ":".join(str(previous / d) for d in ("tests/e2e", "tests", "hack"))},
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    old_sets = tuple(v.format(namespace=ns, hub=hub.url) for v in expected["old_sets"])
    new_sets = tuple(v.format(namespace=ns, hub=hub.url) for v in expected["new_sets"])
    api = Api(cluster, ns)
    handle = Installed(
        cluster=cluster,
        operator_namespace=op_ns,
        namespace=ns,
        service_account=f"{RELEASE}-trtllm-operator",
        kubeconfig=tmp_path / "operator.kubeconfig",
        log_path=tmp_path / "operator.log",
        hub=hub,
    )
    try:
        # 1. the previous release: its CRDs as its `helm install` created them, its chart, its operator
        cluster.kubectl("replace", "--field-manager=helm", "-f", str(previous / "crds"))
        cluster.helm(
            "install", RELEASE, str(previous / "charts" / "trtllm-operator"), "--namespace", op_ns,
            "--wait", "--timeout", "90s", "--values", "-", *(a for kv in old_sets for a in ("--set", kv)),
            input=old_values, timeout=120,
        )  # fmt: skip
        start_operator(handle, tmp_path, python=old_python)

        # 2. live objects, served from the engine cache the previous release recorded
        create_token_secret(api.core, ns, HF_TOKEN)  # the token the local Hub wants (this release)
        bodies, derived_keys = engines(api)
        recorded = subprocess.run(
            [old_python, "-c", _OLD_CACHE_IMPORT, str(cluster.kubeconfig), ns,
             json.dumps(list(bodies.values()))],
            env={**os.environ, "PYTHONPATH": str(previous / "tests")},
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert recorded.returncode == 0, recorded.stderr[-4000:]
        old_keys: dict[str, str] = json.loads(recorded.stdout)
        for body in bodies.values():
            api.custom.create_namespaced_custom_object(GROUP, VERSION, ns, ENGINE_PLURAL, body)
        for dep, (eng, replicas) in FLEET.items():
            manifest = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "LLMDeployment",
                "metadata": {"name": dep},
                "spec": {"engineRef": {"name": eng}, "replicas": replicas},
            }
            api.custom.create_namespaced_custom_object(GROUP, VERSION, ns, DEPLOYMENT_PLURAL, manifest)
        wait_for(lambda: ready(api, old_keys), timeout=120, desc="the previous release: everything Ready")
        before = snapshot(api)
        assert before["jobs"] == [], "the previous release built although its keys were in the cache"
        assert len(before["serving_pods"]) == 3

        # 3. the upgrade, as docs/install.md says: the old pod goes first (Recreate), new CRDs, chart
        mark = cluster.audit_mark()
        handle.stop()
        crds = cluster.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", str(REPO_ROOT / "crds"), check=False
        )
        assert crds.returncode == 0, f"the documented CRD upgrade failed:\n{crds.stderr}"
        if expected["reuse_values_refused"]:
            # --reuse-values renders this chart with the previous chart's defaults: refused, naming the fix
            reused = cluster.helm(
                "upgrade", RELEASE, str(CHART), "--namespace", op_ns, "--reuse-values", "--dry-run",
                check=False, timeout=120,
            )  # fmt: skip
            assert reused.returncode != 0 and "--reset-then-reuse-values" in reused.stderr, reused.stderr
        if expected["kept_value_refused"]:
            # the value the user set in the previous release, which this chart lacks: refused, naming the fix
            kept = cluster.helm(
                "upgrade", RELEASE, str(CHART), "--namespace", op_ns, "--reset-then-reuse-values",
                "--dry-run", "--set", new_sets[0], check=False, timeout=120,
            )  # fmt: skip
            assert kept.returncode != 0 and expected["kept_value_refused"] in kept.stderr, kept.stderr
        upgraded = cluster.helm(
            "upgrade", RELEASE, str(CHART), "--namespace", op_ns, "--reset-then-reuse-values",
            *(a for kv in new_sets for a in ("--set", kv)), "--wait", "--timeout", "90s",
            check=False, timeout=120,
        )  # fmt: skip
        helm_out = upgraded.stdout + upgraded.stderr
        assert upgraded.returncode == 0, f"the documented helm upgrade failed:\n{helm_out}"
        log_offset = len(handle.log())
        start_operator(handle, tmp_path)

        # 4. settled: kopf resumed every object (its "Resuming is processed", logged once the resume
        # handlers of an object are done; kopf 1.45.2 kopf/_core/reactor/processing.py), then all Ready
        def resumed() -> int:
            return sum("Resuming is processed" in line for line in handle.log()[log_offset:].splitlines())

        wait_for(lambda: resumed() >= len(bodies) + len(FLEET), timeout=120, desc="every object resumed")
        served = set(bodies)  # every engine: the old one kept serving from the cache, so does the new

        def settled() -> dict[str, str] | None:
            keys = {n: (api.get(ENGINE_PLURAL, n).get("status") or {}).get("engineKey") for n in served}
            if not all(keys.values()):
                return None
            typed = {n: str(k) for n, k in keys.items()}
            return typed if ready(api, typed) else None

        keys = wait_for(settled, timeout=180, desc="the new release: everything Ready")
        after = snapshot(api)
        events = cluster.audit_events(mark)
    except AssertionError as exc:  # what the operators left, for the report
        state = {p: [o.get("status") for o in api.items(p)] for p in (ENGINE_PLURAL, DEPLOYMENT_PLURAL)}
        raise AssertionError(f"{exc}\nstatuses: {json.dumps(state, indent=1)[:6000]}") from exc
    finally:
        handle.stop()
    result = Upgraded(
        base=base,
        expected=expected,
        api=api,
        operator_namespace=op_ns,
        service_account_user=f"system:serviceaccount:{op_ns}:{handle.service_account}",
        old_keys=old_keys,
        derived_keys=derived_keys,
        keys=keys,
        before=before,
        after=after,
        events=events,
        log=handle.log(),
        old_render=rendered(cluster, previous / "charts" / "trtllm-operator", op_ns, old_values, *old_sets),
        new_render=rendered(cluster, CHART, op_ns, old_values, *new_sets),
        served=served,
    )
    # everything the tests compare, for a failing run's investigation
    dump = {k: v for k, v in vars(result).items() if k not in ("api", "log", "base")}
    (tmp_path / "upgraded.json").write_text(json.dumps(dump, indent=1, default=sorted))
    return result


def test_the_new_operator_runs_clean(upgraded: Upgraded) -> None:
    assert "Traceback" not in upgraded.log, upgraded.log[-4000:]


def test_engine_keys_move_only_with_a_key_migration(upgraded: Upgraded) -> None:
    """EXPECTED's ``engine_keys_change`` is the two trees' derivations (the previous release's key,
    recorded by its own code, against this tree's for the same stored spec), and the operator moves
    exactly the engines whose derivation differs."""
    u = upgraded
    derived = {n for n in u.served if u.derived_keys[n] != u.old_keys[n]}
    assert derived == (u.served if u.expected["engine_keys_change"] else set()), (u.old_keys, u.derived_keys)
    moved = {n for n in u.served if u.keys[n] != u.old_keys[n]}
    assert moved == derived, (u.old_keys, u.keys)


def test_serving_template_changes_only_where_the_releases_differ(upgraded: Upgraded) -> None:
    u = upgraded
    before, after = u.before["templates"], u.after["templates"]
    changes = {d: sorted(diff_paths(before[d], after[d])) for d in before}
    assert changes == {d: sorted(u.expected["serving_template"]) for d in FLEET}, json.dumps(changes)


def test_rebuilt_only_with_a_key_migration(upgraded: Upgraded) -> None:
    """One builder Job per engine for its new key, or none."""
    u = upgraded
    jobs = u.api.batch.list_namespaced_job(u.api.ns).items
    job_keys = Counter(j.metadata.labels[LABEL_ENGINE_KEY] for j in jobs)
    if u.expected["engine_keys_change"]:
        assert job_keys == Counter({u.keys[n][:63]: 1 for n in u.served}), job_keys
    else:
        assert u.after["jobs"] == [], f"rebuilt without a key change: {u.after['jobs']}"


def test_rebuilt_artifacts_lie_where_this_release_puts_them(upgraded: Upgraded) -> None:
    """A rebuilt engine's artifact under this release's root; without a key change, where it was."""
    u = upgraded
    root = u.expected["artifact_root"].format(namespace=u.api.ns)
    uris = {n: u.after["engines"][n]["status"]["artifact"]["uri"] for n in u.served}
    assert uris == {n: f"{root}/{u.keys[n]}" for n in u.served}, uris
    old = {n: u.before["engines"][n]["status"]["artifact"]["uri"] for n in u.served}
    previous_root = u.expected["previous_artifact_root"].format(namespace=u.api.ns)
    assert old == {n: f"{previous_root}/{u.old_keys[n]}" for n in u.served}, old


def test_serving_pods_restart_only_with_a_key_migration(upgraded: Upgraded) -> None:
    """Rolled as often as EXPECTED says (ReplicaSets created, audit log), ending on one new
    pod-template hash per deployment, or kept (same UIDs)."""
    u = upgraded
    before, after = u.before["serving_pods"], u.after["serving_pods"]
    created = Counter(
        e["objectRef"]["name"].rsplit("-", 1)[0]
        for e in upgraded.events
        if e["verb"] == "create"
        and e["objectRef"].get("resource") == "replicasets"
        and e["objectRef"].get("namespace") == upgraded.api.ns
    )
    assert created == Counter({d: u.expected["serving_rolls"] for d in FLEET}), created
    if u.expected["serving_rolls"]:
        assert not before.keys() & after.keys()
        old_hashes, new_hashes = set(before.values()), set(after.values())
        assert len(new_hashes) == len(FLEET) and not old_hashes & new_hashes, (old_hashes, new_hashes)
    else:
        assert after == before, "serving pods restarted"


def test_children_kept_and_written_only_as_required(upgraded: Upgraded) -> None:
    """The same child objects (UIDs); the operator's writes (audit log, by its ServiceAccount)
    exactly of the kinds EXPECTED lists."""
    u = upgraded
    kept = {k: v[0] for k, v in u.before["children"].items()}
    assert {k: u.after["children"][k][0] for k in kept if k in u.after["children"]} == kept
    writes = Counter(
        (e["verb"], e["objectRef"].get("resource", ""), e["objectRef"].get("subresource", ""))
        for e in u.events
        if e.get("user", {}).get("username") == u.service_account_user
        and e["verb"] in WRITE_VERBS
        and e["objectRef"].get("namespace") == u.api.ns
    )
    assert set(writes) == u.expected["operator_writes"], dict(writes)
    rebuilt = len(u.served) if u.expected["engine_keys_change"] else 0
    assert writes[("create", "jobs", "")] == rebuilt, writes
    patched = Counter(
        (e["objectRef"]["resource"], e["objectRef"]["name"])
        for e in u.events
        if e.get("user", {}).get("username") == u.service_account_user
        and e["verb"] == "patch"
        and e["objectRef"].get("resource") in u.expected["object_patches"]
        and not e["objectRef"].get("subresource")
        and e["objectRef"].get("namespace") == u.api.ns
        and e.get("responseStatus", {}).get("code", 0) < 400
    )
    names = {"llmengines": u.served, "llmdeployments": set(FLEET)}
    patches = u.expected["object_patches"]
    assert patched == Counter({(r, n): c for r, c in patches.items() for n in names[r]}), patched
    finalized = {
        n: o["metadata"].get("finalizers") for k in ("engines", "deployments") for n, o in u.after[k].items()
    }
    assert not any(finalized.values()), finalized
    once_per_deployment = {
        w for w in u.expected["operator_writes"] if w[1] in ("secrets", "networkpolicies", "services")
    }
    assert {w: writes[w] for w in once_per_deployment} == {w: len(FLEET) for w in once_per_deployment}, writes


def test_specs_kept_and_statuses_changed_only_as_required(upgraded: Upgraded) -> None:
    u = upgraded
    problems = []
    for kind, plural, status_fields in (
        ("engines", ENGINE_PLURAL, u.expected["engine_status"]),
        ("deployments", DEPLOYMENT_PLURAL, u.expected["deployment_status"]),
    ):
        allowed = set(status_fields)
        for name, old in u.before[kind].items():
            new = u.after[kind][name]
            assert new["metadata"]["uid"] == old["metadata"]["uid"]
            spec = sorted(diff_paths(old["spec"], new["spec"]))
            if spec != sorted(u.expected["spec_read_back"].get(plural, [])):
                problems.append(f"{plural}/{name}: spec {spec}")
            changed = changed_fields(old.get("status") or {}, new.get("status") or {})
            if not changed <= allowed:
                problems.append(f"{plural}/{name}: status {sorted(changed - allowed)}")
    assert not problems, problems


def test_chart_objects_change_only_where_the_releases_differ(upgraded: Upgraded) -> None:
    u = upgraded
    old, new = u.old_render, u.new_render
    differs = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    op_ns = upgraded.operator_namespace
    assert differs == {k.format(release_namespace=op_ns) for k in u.expected["chart_objects"]}, differs


def test_engine_on_the_previous_releases_defaults_survives_the_upgrade(upgraded: Upgraded) -> None:
    """An LLMEngine created without ``calibration`` under the previous release: its stored calibration
    (that CRD's default, which this release refuses as written) reads as not set — the engine is
    Ready on the key of the same engine created now without calibration — and the stored value stays.
    The user can still edit the object: the API server re-checks the calibration rule only when the
    calibration changes (CRD validation ratcheting, default on since Kubernetes 1.30 and GA in 1.33:
    kubernetes pkg/features/versioned_kube_features.go, ``CRDValidationRatcheting``)."""
    u = upgraded
    if u.expected["legacy_calibration"] is None:
        pytest.skip(f"{u.base.name}: its LLMEngine CRD has no calibration default to survive")
    old = u.before["engines"][LEGACY]["spec"]
    assert old["quantization"]["calibration"] == u.expected["legacy_calibration"]
    now = u.api.get(ENGINE_PLURAL, LEGACY)
    assert now["spec"] == old
    created_now = {
        **old,
        "quantization": {k: v for k, v in old["quantization"].items() if k != "calibration"},
    }
    prepared = prepare_engine(LEGACY, created_now, hf_config=hf_config(TINYLLAMA), namespace=u.api.ns)
    assert isinstance(prepared, PreparedEngine), prepared
    assert (now["status"]["phase"], u.keys[LEGACY]) == ("Ready", prepared.key), now["status"]
    edited = u.api.custom.patch_namespaced_custom_object(
        GROUP, VERSION, u.api.ns, ENGINE_PLURAL, LEGACY,
        {"spec": {"gpu": {"podAnnotations": {"example.com/edited": "after-upgrade"}}}},
    )  # fmt: skip
    assert edited["spec"]["quantization"]["calibration"] == old["quantization"]["calibration"]
