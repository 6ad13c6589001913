"""Fault injection against the real local control plane: the operator survives what production does to it.

* **SIGKILL at seeded points** — one long scenario (builds, then a key change that rebuilds and rolls
  every deployment) during which the operator process is SIGKILLed at ``KILL_POINTS`` seeded delays
  and restarted; afterwards every object converges with exactly one Job per new engine key (an old
  key's Job finished, or was stopped as superseded with a ``BuildStopped`` Event), exactly one
  Deployment per LLMDeployment, and no operator-made child without a live owner.
  Restarts are cheap: a *zygote* process imports the operator once and ``fork()``s a fresh operator
  per cycle (each child is a real OS process that gets a real SIGKILL; no shutdown code runs).
* **API outage** — etcd and kube-apiserver stopped (SIGTERM) for ``OUTAGE_SECONDS`` and restarted
  with the same flags, ports and certificates (support/outage.py); the operator (never restarted)
  acts on a change made right after the API returns. How soon is a benchmark's bound, not this
  test's: benchmarks/outage.py.
* **Concurrent writers** — another client patches labels, annotations and ``spec.replicas`` in a tight
  loop while the operator writes status; every one of the client's updates is kept and the operator
  converges on the last ``replicas``.
* **Builder disruption** — the node of a running builder pod is drained (cordon + Eviction API): the
  Job's podFailurePolicy ignores the DisruptionTarget failure (backoffLimit 0 notwithstanding) and
  runs the build on another node; the engine becomes Ready from the one Job.
* **Quiet when settled** — a settled LLMDeployment's reconciles write nothing; the operator SIGKILLed
  and restarted with ``SCALE`` LLMEngines + ``SCALE`` LLMDeployments converged resumes every one of
  them without a single write (children, statuses, kopf's own annotations).
* **Bounded connections** — kopf's session has a bounded pool (handlers/kopfsession.py): with only
  one connection left beside every open watch stream, a burst of objects created at once still
  converges and kopf's PATCHes all go through (no deadlock of watches and requests).

Seeds: ``SEED`` (module constant) drives every random choice; a failure prints the kill schedule.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from kopf._cogs.clients.auth import APIContext
from kubernetes import client
from localcluster import ControlPlane, add_gpu_nodes, delete_nodes, find_bin_dir, wait_nodes_ready
from support.api import Api
from support.artifacts import cache_artifact
from support.cluster import WRITE_VERBS, LocalCluster
from support.manifests import (
    H100,
    EngineBuilder,
    a_cached_engine,
    a_deployment,
    an_engine,
    create_token_secret,
    success_report,
)
from support.operator import fast_settings, operator_process, running_operator
from support.outage import api_outage
from support.wait import wait_for

from trtllm_operator.api import ENGINE_PLURAL, GROUP
from trtllm_operator.api.wire import LABEL_ENGINE_KEY, LABEL_MANAGED_BY, MANAGED_BY
from trtllm_operator.handlers import kopfsession, startup
from trtllm_operator.metrics.operator_metrics import REGISTRY

pytestmark = pytest.mark.slow

SEED = 20261129
KILL_POINTS = 22
OUTAGE_SECONDS = 30.0
#: How long the operator may take to act after the outage before the test calls it stuck — a
#: liveness guard, not a measured bound (that is benchmarks/outage.py's RECOVERY_BOUND_SECONDS).
RECOVERY_GUARD_SECONDS = 70.0
BUILD_MS = 8_000  # long enough to drain the node under a running build
DEPLOYMENTS = "llmdeployments"
LABEL_DEPLOYMENT = f"{GROUP}/deployment"

# The zygote: imports the operator once (settings from argv[1] as JSON, so the handlers register with
# them), then forks one operator process per "fork LOGPATH" line on stdin and prints the child's PID.
ZYGOTE = r"""
import json, os, signal, sys
from trtllm_operator.settings import Settings, configure
settings = Settings.model_validate(json.loads(sys.argv[1]))
configure(settings)
import kopf, trtllm_operator.handlers  # noqa: F401  (register the handlers before forking)
from trtllm_operator.commands.run import run_operator
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
for line in sys.stdin:
    log_path = line.split(" ", 1)[1].strip()
    pid = os.fork()
    if pid == 0:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        run_operator(settings)
        os._exit(0)
    print(pid, flush=True)
"""


class Zygote:
    """A pre-imported operator that forks a fresh operator process on demand (see ``ZYGOTE``)."""

    def __init__(self, cluster: LocalCluster, namespaces: list[str], log_dir: Path) -> None:
        settings = fast_settings(namespaces, resync_seconds=5.0)
        self.log_dir = log_dir
        self.count = 0
        self.pids: list[int] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, json.dumps(settings.model_dump(mode="json"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**cluster.env(), "PYTHONUNBUFFERED": "1"},
            text=True,
        )

    def fork(self) -> int:
        """Start one operator process; returns its PID (its log: ``log_dir/operator-N.log``)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.count += 1
        self.proc.stdin.write(f"fork {self.log_dir / f'operator-{self.count}.log'}\n")
        self.proc.stdin.flush()
        pid = int(self.proc.stdout.readline())
        self.pids.append(pid)
        return pid

    def kill(self, pid: int) -> None:
        """SIGKILL one forked operator and wait until it is gone."""
        os.kill(pid, signal.SIGKILL)
        self.pids.remove(pid)
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=10, interval=0.05, desc=f"pid {pid} gone")

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("operator-*.log")))

    def close(self) -> None:
        """SIGKILL every forked operator still running, then the zygote."""
        for pid in self.pids:  # only our own children: their parent is the zygote
            stat = Path(f"/proc/{pid}/stat")
            if stat.exists() and int(stat.read_text().rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


# ----------------------------------------------------------------------------- cluster helpers
def kwok_engine(name: str, max_batch_size: int, build_ms: int) -> EngineBuilder:
    """An engine whose kwok builder pod succeeds after ``build_ms`` with the builder's own report."""
    eng = an_engine(name).max_batch_size(max_batch_size)
    return eng.succeeds(success_report(eng.prepared())).runs_for(build_ms)


def deployment_ready(api: Api, name: str, key: str) -> bool:
    s = api.get(DEPLOYMENTS, name).get("status") or {}
    want = api.get(DEPLOYMENTS, name)["spec"]["replicas"]
    return bool(s.get("phase") == "Ready" and s.get("engineKey") == key and s.get("readyReplicas") == want)


def owners_alive(api: Api) -> list[str]:
    """Operator-made children whose every owner is gone (orphans), as 'Kind/name' strings."""
    live = {o["metadata"]["uid"] for p in (ENGINE_PLURAL, DEPLOYMENTS) for o in api.items(p)}
    live |= {d.metadata.uid for d in api.apps.list_namespaced_deployment(api.ns).items}
    orphans = []
    selector = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
    children: list[tuple[str, Any]] = [
        *(("Job", j) for j in api.batch.list_namespaced_job(api.ns, label_selector=selector).items),
        *(("Deployment", d) for d in api.apps.list_namespaced_deployment(api.ns).items),
        *(("Service", s) for s in api.core.list_namespaced_service(api.ns).items),
        *(
            ("ConfigMap", c)
            for c in api.core.list_namespaced_config_map(api.ns, label_selector=selector).items
        ),
    ]
    for kind, obj in children:
        refs = obj.metadata.owner_references or []
        if kind == "ConfigMap" and not refs:
            continue  # the engine-cache index outlives engines by design (docs/operator.md)
        if kind == "Service" and obj.metadata.name == "kubernetes":
            continue
        if not any(r.uid in live for r in refs):
            orphans.append(f"{kind}/{obj.metadata.name}")
    return orphans


# ----------------------------------------------------------------------------- SIGKILL at seeded points
def test_sigkill_at_seeded_points_converges_without_duplicates(
    cluster: LocalCluster, api: Api, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    names = [f"m{i}" for i in range(4)]
    batch_a = {n: 8 * (i + 1) for i, n in enumerate(names)}  # distinct keys
    batch_b = {n: 8 * (i + 1) + 100 for i, n in enumerate(names)}  # the key change
    engines = {n: kwok_engine(n, batch_a[n], rng.randrange(1500, 6000)) for n in names}
    for n in names:
        api.create(engines[n])
        api.create(a_deployment(f"d-{n}", n, replicas=rng.randrange(1, 3)))

    zygote = Zygote(cluster, [api.ns], tmp_path)
    schedule: list[tuple[int, float, str]] = []
    try:
        for point in range(KILL_POINTS):
            if point == KILL_POINTS // 2:
                # mid-scenario: change every engine's key → rebuilds, then rollouts of every deployment
                for n in names:
                    changed = kwok_engine(n, batch_b[n], rng.randrange(1500, 5000))
                    api.patch(ENGINE_PLURAL, n, {"spec": changed.manifest(api.ns)["spec"]})
            delay = rng.uniform(0.3, 3.0)
            pid = zygote.fork()
            time.sleep(delay)
            phases = ",".join(str((e.get("status") or {}).get("phase")) for e in api.items(ENGINE_PLURAL))
            schedule.append((point, round(delay, 2), phases))
            zygote.kill(pid)

        zygote.fork()  # the last one is left running
        want = {n: kwok_engine(n, batch_b[n], 0).prepared() for n in names}

        def converged() -> bool:
            for n in names:
                e = api.get(ENGINE_PLURAL, n)
                if (e.get("status") or {}).get("phase") != "Ready":
                    return False
                if e["status"].get("engineKey") != want[n].key:
                    return False
                if not deployment_ready(api, f"d-{n}", want[n].key):
                    return False
            return True

        wait_for(
            converged,
            timeout=150,
            interval=0.5,
            desc=f"every engine and deployment Ready on the new key (kill schedule {schedule})",
        )
        jobs = api.batch.list_namespaced_job(api.ns).items
        per_key = Counter(j.metadata.labels[LABEL_ENGINE_KEY] for j in jobs)
        assert all(c == 1 for c in per_key.values()), f"duplicate builder Jobs per key: {per_key}"
        assert {want[n].key[:63] for n in names} <= set(per_key), f"one Job per new key: {sorted(per_key)}"
        # An old key's Job is there (its build finished before the edit; kept: TTL after a day) or
        # was stopped as superseded (still running at the edit; its BuildStopped Event may be lost
        # to a SIGKILL between the delete and the Event, so Events are reported, not counted).
        old_keys = {kwok_engine(n, batch_a[n], 0).prepared().key[:63] for n in names}
        assert set(per_key) <= old_keys | {want[n].key[:63] for n in names}, sorted(per_key)
        stopped = [
            e.message for e in api.core.list_namespaced_event(api.ns).items if e.reason == "BuildStopped"
        ]
        deps = Counter(
            (d.metadata.labels or {}).get(LABEL_DEPLOYMENT)
            for d in api.apps.list_namespaced_deployment(api.ns).items
        )
        assert deps == Counter({f"d-{n}": 1 for n in names}), f"one Deployment per LLMDeployment: {deps}"
        for n in names:
            dep = api.get(DEPLOYMENTS, f"d-{n}")
            pods = api.core.list_namespaced_pod(api.ns, label_selector=f"{LABEL_DEPLOYMENT}=d-{n}").items
            live = [p for p in pods if p.metadata.deletion_timestamp is None]
            assert len(live) == dep["spec"]["replicas"], (n, [p.metadata.name for p in live])
        assert owners_alive(api) == []
        assert "Traceback" not in zygote.logs(), zygote.logs()[-4000:]
        print(f"\n[faults] {KILL_POINTS} SIGKILLs (point, delay s, engine phases): {schedule}")
        print(f"[faults] old-key Jobs kept {len(old_keys & set(per_key))}, stopped: {stopped}")
    finally:
        zygote.close()


# ----------------------------------------------------------------------------- API outage
@pytest.fixture
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A control plane of its own: stopping its etcd and apiserver cannot disturb other tests."""
    cp = ControlPlane(
        work_dir=tmp_path_factory.mktemp("outage-cluster"), bin_dir=find_bin_dir(), log=lambda _: None
    )
    cp.start(timeout=180)
    try:
        yield LocalCluster(control_plane=cp)
    finally:
        cp.stop()


def test_operator_recovers_on_its_own_after_etcd_and_apiserver_outage(own_cluster: LocalCluster) -> None:
    cluster = own_cluster
    cp = cluster.control_plane
    api = Api(cluster, cluster.create_namespace("outage"))
    create_token_secret(api.core, api.ns)
    api.create(kwok_engine("before", 8, 200).manifest(api.ns))
    with running_operator(cluster, [api.ns]) as op:
        wait_for(lambda: (api.get(ENGINE_PLURAL, "before").get("status") or {}).get("phase") == "Ready", 60)
        with api_outage(cp, cluster.server):
            time.sleep(OUTAGE_SECONDS)
            assert op.thread.is_alive() and not op.errors, "the operator died during the outage"
        returned = time.monotonic()
        # a change right after the API is back: the operator must notice it without a restart
        api.create(kwok_engine("after", 16, 200).manifest(api.ns))
        wait_for(
            lambda: (api.get(ENGINE_PLURAL, "after").get("status") or {}).get("conditions"),
            timeout=RECOVERY_GUARD_SECONDS,
            interval=0.2,
            desc="the operator acting on an engine created after the outage",
        )
        recovery = time.monotonic() - returned
        # reported, not bounded here (benchmarks/outage.py holds the bound)
        print(
            f"\n[faults] API outage {OUTAGE_SECONDS:.0f} s: operator acted {recovery:.1f} s after its return"
        )
        assert op.thread.is_alive() and not op.errors


# ----------------------------------------------------------------------------- concurrent writers
def test_concurrent_edits_lose_no_update(cluster: LocalCluster, api: Api) -> None:
    rng = random.Random(SEED + 1)
    eng = kwok_engine("shared", 8, 200)
    api.create(eng)
    api.create(a_deployment("busy", "shared", replicas=1))
    other = Api(cluster, api.ns)  # its own ApiClient: a second writer
    other.custom = client.CustomObjectsApi(cluster.api_client())
    written: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set() and i < 60:
            replicas = rng.randrange(1, 4)
            body = {
                "metadata": {"labels": {f"w{i}": "x"}, "annotations": {f"example.com/w{i}": str(replicas)}},
                "spec": {"replicas": replicas},
            }
            for plural, name in ((DEPLOYMENTS, "busy"), (ENGINE_PLURAL, "shared")):
                try:
                    other.patch(
                        plural, name, body if plural == DEPLOYMENTS else {"metadata": body["metadata"]}
                    )
                except BaseException as exc:
                    errors.append(exc)
                    return
            written.append(replicas)
            i += 1
            time.sleep(rng.uniform(0, 0.05))

    with running_operator(cluster, [api.ns]) as op:
        thread = threading.Thread(target=writer)
        thread.start()
        thread.join(120)
        stop.set()
        assert not errors, errors
        last = written[-1]
        key = eng.prepared().key
        wait_for(
            lambda: (
                deployment_ready(api, "busy", key)
                and api.apps.read_namespaced_deployment("busy", api.ns).spec.replicas == last
            ),
            timeout=90,
            desc=f"busy Ready with replicas {last}",
        )
        for plural, name in ((DEPLOYMENTS, "busy"), (ENGINE_PLURAL, "shared")):
            meta = api.get(plural, name)["metadata"]
            missing = [i for i in range(len(written)) if meta["labels"].get(f"w{i}") != "x"]
            assert not missing, f"{plural}/{name} lost the client's label updates {missing}"
            missing = [
                i for i in range(len(written)) if f"example.com/w{i}" not in meta.get("annotations", {})
            ]
            assert not missing, f"{plural}/{name} lost the client's annotation updates {missing}"
        assert api.get(DEPLOYMENTS, "busy")["spec"]["replicas"] == last
        assert (api.get(ENGINE_PLURAL, "shared").get("status") or {}).get("phase") == "Ready"
        assert op.thread.is_alive() and not op.errors


# ----------------------------------------------------------------------------- builder disruption
@pytest.fixture
def fault_nodes(cluster: LocalCluster, namespace: str) -> Iterator[list[str]]:
    """Two fresh H100 nodes labelled for this test only (builds are pinned to them)."""
    core = client.CoreV1Api(cluster.api)
    names = add_gpu_nodes(cluster.api, 2, prefix=f"fault-{namespace}")
    for n in names:
        core.patch_node(n, {"metadata": {"labels": {"trtllm-operator.dev/fault-test": namespace}}})
    wait_nodes_ready(cluster.api, names)
    yield names
    delete_nodes(cluster.api, names)


def test_drained_builder_retries_the_build_elsewhere(
    cluster: LocalCluster, api: Api, fault_nodes: list[str]
) -> None:
    eng = kwok_engine("evictee", 8, BUILD_MS).backoff_limit(0)
    eng.body["spec"]["gpu"]["nodeSelector"] = {"trtllm-operator.dev/fault-test": api.ns}
    prepared = eng.prepared()
    api.create(eng)
    selector = f"batch.kubernetes.io/job-name={prepared.job_name}"

    def running_pod() -> Any:
        pods = api.core.list_namespaced_pod(api.ns, label_selector=selector).items
        live = [p for p in pods if p.metadata.deletion_timestamp is None and p.status.phase == "Running"]
        return live[0] if len(live) == 1 else None

    with running_operator(cluster, [api.ns]):
        first = wait_for(running_pod, timeout=60, desc="builder pod Running")
        # `kubectl drain`: cordon, then evict. The disruption is not the build's fault. The API server
        # marks the pod DisruptionTarget and deletes it; a kubelet then kills the container and reports
        # phase Failed — kwok has no kubelet for that step, so the test writes it.
        api.core.patch_node(first.spec.node_name, {"spec": {"unschedulable": True}})
        api.core.create_namespaced_pod_eviction(
            first.metadata.name,
            api.ns,
            {"metadata": {"name": first.metadata.name, "namespace": api.ns}},
        )
        api.core.patch_namespaced_pod_status(first.metadata.name, api.ns, {"status": {"phase": "Failed"}})
        second = wait_for(
            lambda: (p := running_pod()) and p.metadata.name != first.metadata.name and p,
            timeout=60,
            desc="a replacement builder pod after the eviction",
        )
        assert second.spec.node_name != first.spec.node_name, "the drained node was reused"
        job = api.batch.read_namespaced_job(prepared.job_name, api.ns)
        assert job.spec.backoff_limit == 0 and not any(
            c.type == "Failed" and c.status == "True" for c in job.status.conditions or []
        ), "backoffLimit 0, yet the eviction failed the Job"
        phase = (api.get(ENGINE_PLURAL, "evictee").get("status") or {}).get("phase")
        assert phase in ("Building", "Pending", "Queued"), phase
        engine = wait_for(
            lambda: (
                (e := api.get(ENGINE_PLURAL, "evictee"))
                and (e.get("status") or {}).get("phase") == "Ready"
                and e
            ),
            timeout=90,
            desc="the engine Ready from the second attempt",
        )
        assert engine["status"]["build"]["jobName"] == prepared.job_name
        assert len(api.batch.list_namespaced_job(api.ns).items) == 1


# ----------------------------------------------------------------------------- quiet when settled
#: Not the operator's children: the custom resources themselves (the test touches them), the pods
#: (the ReplicaSet's and kwok's) and the ReplicaSets (the Deployment controller's).
NOT_CHILDREN = frozenset({"llmdeployments", "llmengines", "pods", "replicasets"})
#: The Kubernetes components write too (status of Deployments, pods); the operator's children are
#: what must stay untouched, by anyone but these.
COMPONENT_AGENTS = ("kube-controller-manager/", "kube-scheduler/", "kwok/")
QUIET_WINDOW_SECONDS = 12.0  # longer than fast_settings' 10 s resync: timer reconciles fall in it too


def _deployment_reconciles() -> float:
    """LLMDeployment reconciles of the in-process operator (``trtllm_operator_reconciles_total``,
    every result). A settled reconcile runs on the watch-cached copy and sends no request for it
    (handlers/plumbing.py ``cache_first``), so the API server's GET count does not show it."""
    return sum(
        REGISTRY.get_sample_value("trtllm_operator_reconciles_total", {"kind": "LLMDeployment", "result": r})
        or 0.0
        for r in ("success", "error", "invalid")
    )


def test_reconciling_a_settled_deployment_writes_nothing(cluster: LocalCluster, api: Api) -> None:
    """A settled LLMDeployment: three update events (metadata changes, each a full reconcile) and at
    least one resync in a quiet window make no POST/PUT/PATCH/DELETE on any of its children, as the
    API server's audit log records every write request. Regression (benchmarks/scale.py idle
    writes): every reconcile used to POST the ConfigMap, Deployment, Service and
    PodDisruptionBudget again (409 AlreadyExists)."""
    eng = kwok_engine("settled", 8, 200)
    api.create(eng)
    api.create(a_deployment("quiet", "settled", replicas=1))
    with running_operator(cluster, [api.ns]):
        wait_for(lambda: deployment_ready(api, "quiet", eng.prepared().key), timeout=90, desc="quiet Ready")
        mark, done, started = cluster.audit_mark(), _deployment_reconciles(), time.monotonic()
        for i in range(3):  # each metadata change is an update event → a full reconcile
            api.patch(DEPLOYMENTS, "quiet", {"metadata": {"annotations": {"example.com/touch": str(i)}}})
        wait_for(lambda: _deployment_reconciles() - done >= 3, timeout=30, desc="three reconciles")
        wait_for(
            lambda: time.monotonic() - started >= QUIET_WINDOW_SECONDS,
            timeout=QUIET_WINDOW_SECONDS + 1,
            desc="the quiet window",
        )
        events = cluster.audit_events(mark)
    touches = [
        e
        for e in events
        if e["verb"] == "patch"
        and e["objectRef"].get("resource") == DEPLOYMENTS
        and e["objectRef"].get("name") == "quiet"
        and not e["objectRef"].get("subresource")
    ]
    assert len(touches) >= 3, "the audit log must show the test's own three patches"  # the log works
    writes = [
        f"{e['verb']} {e['objectRef'].get('resource')} {e['objectRef'].get('name', '')}"
        f" {e['objectRef'].get('subresource', '')} by {e.get('userAgent', '')!r}"
        f" → {e.get('responseStatus', {}).get('code')}"
        for e in events
        if e["verb"] in WRITE_VERBS
        and e["objectRef"].get("namespace") == api.ns
        and e["objectRef"].get("resource") not in NOT_CHILDREN
        and not e.get("userAgent", "").startswith(COMPONENT_AGENTS)
    ]
    assert writes == [], f"a settled LLMDeployment's children were written: {writes}"


# ----------------------------------------------------------------------------- restart at scale
SCALE = 100  # LLMEngines, and as many LLMDeployments (one replica each)
SCALE_KEYS = 10  # distinct engine keys among them, each in the engine cache (no builder Job)
KOPF_DIFFBASE = "kopf.trtllm-operator.dev/last-handled-configuration"
RESTART_SETTLE_SECONDS = 10.0  # writes are still counted this long after every object resumed


def resumed(log: str, namespace: str) -> set[str]:
    """Objects kopf has resumed in ``log`` (its "Resuming is processed" message, logged once every
    resume handler of an object is done; kopf 1.45.2 kopf/_core/actions/processing.py)."""
    marker = f"[{namespace}/"
    return {
        line.split(marker, 1)[1].split("]", 1)[0]
        for line in log.splitlines()
        if "Resuming is processed" in line and marker in line
    }


@pytest.fixture
def scale_nodes(cluster: LocalCluster, namespace: str) -> Iterator[list[str]]:
    """Enough kwok H100 nodes for one serving GPU per LLMDeployment (8 GPUs each)."""
    names = add_gpu_nodes(cluster.api, -(-SCALE // 8), product=H100, gpus=8, prefix=f"restart-{namespace}")
    wait_nodes_ready(cluster.api, names)
    yield names
    delete_nodes(cluster.api, names)


def test_restart_at_scale_writes_nothing(
    cluster: LocalCluster, api: Api, scale_nodes: list[str], tmp_path: Path
) -> None:
    """``SCALE`` + ``SCALE`` converged objects; the operator SIGKILLed and a new one started: it
    resumes every object (kopf's resume handlers reconcile each once, on the watch-cached copy)
    and makes no POST/PUT/PATCH/DELETE in the namespace — no child, no status, no kopf
    annotation — as the API server's audit log records every write request. The production resync
    period (300 s) keeps timers out of the window;
    test_reconciling_a_settled_deployment_writes_nothing covers those."""
    with api.artifact_pvc():  # deletes the PV (cluster scoped: the namespace leaves it) at the end
        engines = [a_cached_engine(f"e-{i}", max_batch_size=8 * (i % SCALE_KEYS + 1)) for i in range(SCALE)]
        for body in engines[:SCALE_KEYS]:  # one cache entry per key, as `cache import` records it
            cache_artifact(api.core, api.ns, body)
        mark = cluster.audit_mark()
        for i, body in enumerate(engines):
            api.create(body)
            api.create(a_deployment(f"d-{i}", f"e-{i}", replicas=1))
        created = [
            e
            for e in cluster.audit_events(mark)
            if e["verb"] == "create" and e["objectRef"].get("namespace") == api.ns
            and e["objectRef"].get("resource") in (ENGINE_PLURAL, DEPLOYMENTS)
        ]  # fmt: skip
        assert len(created) == 2 * SCALE, "the audit log must show the test's own creations"  # the log works
        settings = {"resync_seconds": 300.0}

        started = time.monotonic()
        with operator_process(cluster, [api.ns], tmp_path / "operator-1.log", **settings) as first:
            wait_for(
                lambda: _scale_converged(api),
                timeout=600,
                interval=2.0,
                desc=f"{SCALE} + {SCALE} objects converged",
            )
            converge_s = time.monotonic() - started
            first.kill()
        jobs = api.batch.list_namespaced_job(api.ns).items
        assert jobs == [], "served from the engine cache: no builder Job"
        before = {
            f"{p}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for p in (ENGINE_PLURAL, DEPLOYMENTS)
            for o in api.items(p)
        }

        mark = cluster.audit_mark()
        restarted = time.monotonic()
        log_path = tmp_path / "operator-2.log"
        with operator_process(cluster, [api.ns], log_path, **settings) as second:
            wait_for(
                lambda: len(resumed(second.log(), api.ns)) >= 2 * SCALE,
                timeout=600,
                interval=1.0,
                desc=f"the restarted operator resumed all {2 * SCALE} objects",
            )
            resume_s = time.monotonic() - restarted
            wait_for(
                lambda: time.monotonic() - restarted >= resume_s + RESTART_SETTLE_SECONDS,
                timeout=RESTART_SETTLE_SECONDS + 1,
                desc="the settle window",
            )
            events = cluster.audit_events(mark)
            log = second.log()
        writes = Counter(
            f"{e['verb']} {e['objectRef'].get('resource')}"
            + (f"/{e['objectRef']['subresource']}" if e["objectRef"].get("subresource") else "")
            + f" by {e.get('userAgent', '')!r}"
            for e in events
            if e["verb"] in WRITE_VERBS
            and e["objectRef"].get("namespace") == api.ns
            and not e.get("userAgent", "").startswith(COMPONENT_AGENTS)
        )
        assert not writes, f"the restarted operator wrote: {dict(writes)}"
        after = {
            f"{p}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for p in (ENGINE_PLURAL, DEPLOYMENTS)
            for o in api.items(p)
        }
        assert after == before, "LLMEngine/LLMDeployment objects changed"
        assert "Traceback" not in log, log[-4000:]
        print(
            f"\n[faults] restart at scale: {SCALE} + {SCALE} converged in {converge_s:.0f} s; the restarted"
            f" operator resumed them in {resume_s:.0f} s, 0 writes"
        )


# ----------------------------------------------------------------------------- bounded connections
BURST = 30  # LLMEngines and as many LLMDeployments created at once: kopf PATCHes each (its diff-base)


def _scale_converged(api: Api) -> bool:
    """Every LLMEngine and LLMDeployment Ready (one ready replica each) and handled by kopf to the end
    (its diff-base annotation, written last)."""
    for e in api.items(ENGINE_PLURAL):
        if (e.get("status") or {}).get("phase") != "Ready":
            return False
    for d in api.items(DEPLOYMENTS):
        s = d.get("status") or {}
        if s.get("phase") != "Ready" or s.get("readyReplicas") != 1:
            return False
    return all(
        KOPF_DIFFBASE in (o["metadata"].get("annotations") or {})
        for plural in (ENGINE_PLURAL, DEPLOYMENTS)
        for o in api.items(plural)
    )


def _served_watches(cluster: LocalCluster) -> int:
    """How many of the operator's watched resources (kopf's registry) this cluster serves (API
    discovery): the watch streams kopf opens in one namespace — the derived count includes the
    others too (a CRD not installed here)."""
    served = 0
    for selector in kopfsession.watched_selectors(kopf.get_default_registry()):
        path = f"/apis/{selector.group}/{selector.version}" if selector.group else f"/api/{selector.version}"
        try:
            doc = cluster._call("GET", path)
        except client.ApiException:
            continue
        plural = selector.plural or selector.any_name
        served += any(r.get("name") == plural for r in doc.get("resources", []))
    return served


def test_kopf_works_with_every_watch_open_and_one_connection_left_for_requests(
    cluster: LocalCluster,
    api: Api,
    scale_nodes: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kopf's session to the API server has at most ``watch_streams`` + ``REQUEST_CONNECTIONS``
    connections (handlers/kopfsession.py; kopf 1.45.2's own has no limit). Here the requests' share
    is cut so that **one** connection is left beside the watch streams kopf really opens (one per
    resource this cluster serves): every watch holds its own connection for good, and every kopf
    request — the first listings, the diff-base PATCH of each of ``BURST`` + ``BURST`` objects created
    at once — goes through the one left. No deadlock: every object converges, kopf's PATCHes reach
    the API server (audit log), no kopf request fails or is retried, and at rest exactly the watch
    streams hold a connection, within the derived count."""
    contexts: list[APIContext] = []
    kopf_init = APIContext.__init__

    def recording(self: APIContext, info: Any) -> None:
        kopf_init(self, info)
        contexts.append(self)

    monkeypatch.setattr(APIContext, "__init__", recording)
    # fast_settings: standalone, one namespace, so configure_kopf disables scanning
    kopf_settings = kopf.OperatorSettings()
    kopf_settings.peering.standalone = True
    kopf_settings.scanning.disabled = True
    streams = kopfsession.watch_streams(kopf.get_default_registry(), kopf_settings, [api.ns])
    served = _served_watches(cluster)
    monkeypatch.setattr(startup, "REQUEST_CONNECTIONS", 1 - (streams - served), raising=False)
    caplog.set_level(logging.DEBUG, logger="kopf")
    samples: list[tuple[int, int]] = []  # (connections in use, requests waiting for one), every 50 ms
    sampling = threading.Event()

    def sample(connector: Any) -> None:
        while not sampling.is_set():
            try:
                waiting = sum(len(w) for w in list(connector._waiters.values()))
                samples.append((len(connector._acquired), waiting))
            except RuntimeError:  # changed by the operator's loop while read: the next one
                pass
            time.sleep(0.05)

    with api.artifact_pvc():
        engines = [a_cached_engine(f"b-{i}", max_batch_size=8 * (i % SCALE_KEYS + 1)) for i in range(BURST)]
        for body in engines[:SCALE_KEYS]:
            cache_artifact(api.core, api.ns, body)
        with running_operator(cluster, [api.ns]):
            wait_for(lambda: bool(contexts), timeout=60, desc="kopf's API session")
            connector = contexts[0].session.connector
            assert connector is not None
            limit = connector.limit
            assert limit == served + 1, f"kopf's connections bounded (0: none): {limit}; {served} watches"
            sampler = threading.Thread(target=sample, args=(connector,), daemon=True)
            sampler.start()
            mark = cluster.audit_mark()
            for i, body in enumerate(engines):
                api.create(body)
                api.create(a_deployment(f"d-{i}", f"b-{i}", replicas=1))
            desc = f"{BURST} + {BURST} objects converged"
            wait_for(lambda: _scale_converged(api), timeout=600, interval=2.0, desc=desc)
            at_rest = len(samples)
            time.sleep(5.0)
            sampling.set()
            sampler.join(5)
            events = cluster.audit_events(mark)
    patches = Counter(
        e.get("responseStatus", {}).get("code")
        for e in events
        if e["verb"] == "patch"
        and e.get("userAgent", "").startswith("kopf/")
        and e["objectRef"].get("namespace") == api.ns
    )
    # at rest: the watch streams (each reconnects every watch_server_timeout_seconds, a short gap)
    rest = Counter(in_use for in_use, _ in samples[at_rest:])
    print(
        f"\n[faults] bounded connections: limit {limit} = {served} watches served + 1 ({streams} derived);"
        f" in use at rest {dict(rest)}; in the burst at most {max(u for u, _ in samples)} in use,"
        f" {max(w for _, w in samples)} requests waiting; kopf's PATCHes by status: {dict(patches)}"
    )
    assert sum(n for code, n in patches.items() if code and code < 300) >= 2 * BURST, patches
    idle = rest.most_common(1)[0][0]
    assert idle == served <= streams, f"{idle} connections held at rest: {served} watches, {streams} derived"
    retried = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Request attempt")]
    assert retried == [], retried[:5]
