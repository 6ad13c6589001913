"""Load benchmark: N LLMEngines + N LLMDeployments in a burst; convergence, RSS, API cost, idle writes.

Runs on its own local control plane (hack/localcluster, in a temp dir) with enough kwok GPU nodes
(one GPU per serving replica, 8 per node, 10 % spare). Engines become Ready cheaply through the
engine cache: ``--keys`` distinct engine keys, each registered once as an artifact (what
``trtllm-operator cache import`` does), so no builder Job runs; LLMDeployment ``d-i`` serves
LLMEngine ``e-i`` with one replica.

Steps, in one run:

1. **Baseline** — ``kubectl apply --server-side`` of the same 2 N objects into a namespace no operator
   watches: wall time and kube-apiserver requests (``apiserver_request_total`` from its /metrics,
   before/after).
2. **Burst** — the operator as a subprocess (``trtllm-operator run``, production defaults except the
   watched namespace), then the same apply into its namespace: time until every LLMEngine is Ready and
   every LLMDeployment is Ready with its replicas ready, and API requests during that time.
3. **Idle** — once kopf has handled every creation (its diff-base annotation is on every object; "all
   Ready" can come first), ``--idle-seconds`` (60) with nothing changing: API writes
   (POST/PUT/PATCH/DELETE) by resource, and how many LLMEngine/LLMDeployment objects changed
   resourceVersion.
4. Operator peak RSS: ``VmHWM`` from /proc/<pid>/status. With ``--memory-stats``, what the RSS was
   made of at the operator's highest sample (every 2 s, benchmarks/memprofile/sitecustomize.py):
   live Python objects (pymalloc's bytes in use, glibc malloc's in use), what the two allocators
   hold free (fragmentation), the file-backed pages (code), the rest; the same for the restart.
5. **Restart** — the operator killed and started again with everything converged: time until kopf
   logged "Resuming is processed" for every object, the operator's writes until ``--restart-settle``
   seconds after that, and where the time went: its log's first line (interpreter and imports),
   startup handlers, first resource handler (kopf holds every handler until every index is filled
   from the first listing), last resume; the objects the resume reconciled by the reason logged
   (``resumed, reconciling: …``); the restarted operator's resume / resync / reconcile counters; the
   handlers' requests by phase; with ``--py-spy PATH``, py-spy's samples of the restarted process.

6. **Floor** (``--floor``) — what Kubernetes alone needs for the same workload on the same machine,
   the part of the burst no operator can remove: the operator stopped, the children it created in
   the burst's namespace (every object of the kinds in :data:`CHILD_KINDS` owned by an LLMDeployment,
   server-set fields stripped) applied with ``kubectl apply --server-side`` into a namespace no
   operator watches (its own artifact PVC and kwok GPU nodes), then the time until every Deployment
   there has its replicas ready — the same readiness the burst's "all Ready" waits for — and the API
   requests meanwhile, by client. The burst also applies the 2 N custom objects (the baseline), so the
   least an operator could take is about the larger of the two, their sum if it did them one after
   the other.

Profile of the burst: the control plane audits every request (:data:`AUDIT_EVERY_REQUEST`, Metadata
level: who, verb, resource, timestamps), so the requests are broken down per client (kopf's own
aiohttp session, user agent ``kopf/…``, vs the operator's handlers on the kubernetes client, vs
controllers, kwok and the benchmark itself) × verb × resource, with the API server's time per
client. The operator serves its own /metrics during the run: time in reconciles per kind, the
time synchronous handlers waited for a worker thread (``trtllm_operator_handler_queue_seconds``),
and its counters at convergence — reconciles, resumes, resyncs, and status writes refused by their
guard and fallen back to the merge patch (``trtllm_operator_status_write_refusals_total`` /
``_fallbacks_total``).

Request counts are the API server's totals over all clients (the operator, and the controllers and
kwok reacting to what it creates); "per object" divides by 2 N. Writes to llmengines/llmdeployments
(and their status) come only from the operator and the apply.

    .venv/bin/python benchmarks/scale.py                      # 1,000 + 1,000
    .venv/bin/python benchmarks/scale.py --engines 100        # smaller
    .venv/bin/python benchmarks/scale.py --engines 100 --write-results   # also update RESULTS.md

Prints a Markdown table; ``--write-results`` replaces the "Load" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import urllib3
import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO_ROOT = Path(__file__).resolve().parents[1]
for _p in (REPO_ROOT / "hack", REPO_ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from kubernetes import client, config  # noqa: E402
from localcluster import ControlPlane, add_gpu_nodes, find_bin_dir, wait_nodes_ready  # noqa: E402
from support.artifacts import cache_artifact, prebound_artifact_pvc  # noqa: E402
from support.manifests import H100, IMAGE  # noqa: E402
from support.ports import free_port  # noqa: E402  (the operator binds its metrics port itself)

from trtllm_operator.api import GROUP, VERSION  # noqa: E402

HF_CONFIG_DIR = REPO_ROOT / "tests" / "fixtures" / "model-configs"
RESULTS = REPO_ROOT / "benchmarks" / "RESULTS.md"
BEGIN, END = "<!-- load:begin -->", "<!-- load:end -->"
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")
#: Answers to a conditional write that did not land: 409 (a stale ``resourceVersion``) and 422 (a
#: JSON patch whose ``test`` failed: the operator's guarded status writes, kube/status.py; also a
#: validation error, which the operator does not expect to send).
REFUSED = ("409", "422")
KOPF_DIFFBASE = "kopf.trtllm-operator.dev/last-handled-configuration"
#: User agent of the benchmark's own client, so its polling is not counted as the operator's.
BENCH_AGENT = "scale-benchmark"

#: Audit policy (audit.k8s.io/v1) for the profile: every request at Metadata level (user agent,
#: verb, objectRef, timestamps; no bodies) except leases (the controllers' heartbeats).
AUDIT_EVERY_REQUEST = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    resources:
      - group: coordination.k8s.io
        resources: [leases]
  - level: Metadata
"""


def log(msg: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- manifests
def engine(name: str, key_index: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LLMEngine",
        "metadata": {"name": name},
        "spec": {
            "model": {"source": "hf://meta-llama/Llama-3.1-8B-Instruct"},
            "runtime": {"image": IMAGE},
            "quantization": {"format": "fp8", "kvCacheDtype": "fp8"},
            "parallelism": {"tensor": 1},
            "build": {"maxBatchSize": 8 * (key_index + 1), "maxNumTokens": 8192, "maxSeqLen": 8192},
            "gpu": {"product": H100},
            "storage": {"pvc": {"claimName": "engines", "subPath": "trtllm"}},
        },
    }


def deployment(name: str, engine_name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LLMDeployment",
        "metadata": {"name": name},
        "spec": {"engineRef": {"name": engine_name}, "replicas": 1},
    }


def manifests(n: int, keys: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [engine(f"e-{i}", i % keys) for i in range(n)]
    objs += [deployment(f"d-{i}", f"e-{i}") for i in range(n)]
    return objs


# ----------------------------------------------------------------------------- cluster set-up
def artifact_pvc(core: client.CoreV1Api, ns: str) -> None:
    """A pre-bound PV/PVC pair named ``engines`` (the local control plane runs no PV binder)."""
    prebound_artifact_pvc(core, ns)


def register_artifacts(core: client.CoreV1Api, ns: str, keys: int) -> None:
    """One engine-cache entry per distinct key (as ``trtllm-operator cache import`` records it)."""
    for k in range(keys):
        cache_artifact(core, ns, engine(f"key-{k}", k))


def namespace(core: client.CoreV1Api, name: str) -> None:
    core.create_namespace({"metadata": {"name": name}})
    deadline = time.monotonic() + 60
    while True:
        try:
            core.read_namespaced_service_account("default", name)
            return
        except client.ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# ----------------------------------------------------------------------------- measurements
class Metrics:
    """kube-apiserver's /metrics, read with the cluster's admin token."""

    def __init__(self, cp: ControlPlane) -> None:
        self.url = f"{cp.server}/metrics"
        self.token = cp.token
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE

    def requests(self) -> Counter[tuple[str, str]]:
        """(verb, resource[/subresource]) → apiserver_request_total summed over codes and scopes."""
        req = urllib.request.Request(self.url, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=30, context=self.ctx) as resp:
            text = resp.read().decode()
        out: Counter[tuple[str, str]] = Counter()
        for family in text_string_to_metric_families(text):
            if family.name != "apiserver_request":
                continue
            for sample in family.samples:
                if sample.name != "apiserver_request_total":
                    continue
                res = sample.labels.get("resource", "")
                if sample.labels.get("subresource"):
                    res += "/" + sample.labels["subresource"]
                verb = sample.labels["verb"]
                if verb in WRITE_VERBS and sample.labels.get("code") in REFUSED:
                    verb += f"({sample.labels['code']})"
                out[(verb, res)] += int(sample.value)
        return out


def delta(after: Counter[tuple[str, str]], before: Counter[tuple[str, str]]) -> Counter[tuple[str, str]]:
    d = Counter(after)
    d.subtract(before)
    return Counter({k: v for k, v in d.items() if v > 0})


def writes(d: Counter[tuple[str, str]]) -> Counter[tuple[str, str]]:
    return Counter({k: v for k, v in d.items() if k[0].split("(")[0] in WRITE_VERBS})


def client_of(agent: str) -> str:
    """Who sent a request, from its user agent: kopf's own session (watches, bookkeeping patches,
    its Events), the operator's handlers (the kubernetes client, ``OpenAPI-Generator/…/python``),
    the benchmark, kubectl, kwok, or a kube-controller-manager controller."""
    if agent.startswith("kopf/"):
        return "kopf"
    if agent.startswith("OpenAPI-Generator/"):
        return "handlers"
    if agent.startswith(BENCH_AGENT):
        return "benchmark"
    if agent.startswith("kube-controller-manager/"):
        return "controller-manager:" + agent.rsplit("/", 1)[-1]
    return agent.split("/", 1)[0] or "?"


def _ts(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def audit_events(path: Path, start: int, end: int | None = None) -> Iterator[dict[str, Any]]:
    """The events of the API server's audit log ``path`` (JSON lines) between byte offsets ``start``
    and ``end`` (None: the end of the file); a line that is not JSON (one cut at an offset) is skipped."""
    with path.open("rb") as f:
        f.seek(start)
        data = f.read() if end is None else f.read(end - start)
    for line in data.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        yield ev


def audit_breakdown(path: Path, start: int, end: int | None = None) -> dict[str, Any]:
    """Requests in the audit log between byte offsets ``start`` and ``end``: per client × verb ×
    resource (a write refused with 409 or 422 counted apart) and per client the requests and
    API-server seconds (sum of requestReceived → response; watches left out of the seconds: they
    stay open)."""
    by_key: Counter[tuple[str, str, str]] = Counter()
    seconds: Counter[str] = Counter()
    per_client: Counter[str] = Counter()
    for ev in audit_events(path, start, end):
        who = client_of(ev.get("userAgent") or "")
        ref = ev.get("objectRef") or {}
        res = ref.get("resource") or ev.get("requestURI", "?").split("?")[0]
        if ref.get("subresource"):
            res += "/" + ref["subresource"]
        verb = ev.get("verb", "?")
        code = str((ev.get("responseStatus") or {}).get("code"))
        if code in REFUSED:
            verb += f"({code})"
        by_key[(who, verb, res)] += 1
        per_client[who] += 1
        if ev.get("verb") != "watch" and ev.get("stageTimestamp") and ev.get("requestReceivedTimestamp"):
            seconds[who] += _ts(ev["stageTimestamp"]) - _ts(ev["requestReceivedTimestamp"])
    return {
        "requests": {f"{w} {v} {r}": c for (w, v, r), c in by_key.most_common()},
        "per_client": dict(per_client.most_common()),
        "api_seconds": {w: round(s, 1) for w, s in seconds.most_common()},
    }


#: Histograms read from the operator's /metrics (their _sum and _count), and counters (per label set):
#: reconciles, resumes, resyncs, and the status writes refused by their guard (422) and fallen back to
#: the resourceVersion merge patch (kube/status.py ``patch_status``; docs/reliability.md "The status
#: write") — the refusals the audit log's 422s count, as the operator saw them.
OPERATOR_HISTOGRAMS = ("trtllm_operator_reconcile_duration_seconds", "trtllm_operator_handler_queue_seconds")
OPERATOR_COUNTERS = (
    "trtllm_operator_reconciles",
    "trtllm_operator_resumes",
    "trtllm_operator_resyncs",
    "trtllm_operator_status_write_refusals",
    "trtllm_operator_status_write_fallbacks",
)


def operator_metrics(port: int) -> dict[str, float]:
    """The operator's reconcile and handler-queue histograms (sum and count) and its counters of
    :data:`OPERATOR_COUNTERS` (``name{labels} total``) from its /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in OPERATOR_HISTOGRAMS:
            for sample in family.samples:
                if sample.name.endswith(("_sum", "_count")):
                    kind = sample.labels.get("kind", "")
                    key = f"{family.name.removeprefix('trtllm_operator_')}{'{' + kind + '}' if kind else ''}"
                    out[f"{key} {sample.name.rsplit('_', 1)[1]}"] = sample.value
        elif family.name in OPERATOR_COUNTERS:
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                    out[f"{family.name.removeprefix('trtllm_operator_')}{{{labels}}} total"] = sample.value
    return out


def _log_time(line: str) -> float | None:
    """Epoch seconds of an operator text-log line (``[2026-12-02 19:05:05,123] …``, the machine's
    local time, as ``logging`` writes it); None for other lines."""
    if not line.startswith("[") or "]" not in line:
        return None
    try:
        return dt.datetime.strptime(line[1 : line.index("]")], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def restart_timeline(log_path: Path, started: float) -> dict[str, Any]:
    """Where the restarted operator's time went, from its log (seconds after ``started``, the epoch
    time the benchmark started the process): its first line (interpreter and imports), the last
    startup activity (kopf's ``Activity '…' succeeded``: settings, index binding, resync loops), the
    first resource handler's line (kopf runs no resource handler before every index is filled from
    the first listing of every watched resource — kopf 1.45.2 ``kopf/_core/reactor/processing.py``
    ``process_resource_event``, ``operator_indexed.wait_for`` — so it marks the end of the listing and
    indexing), the last "Resuming is processed", and the objects the resume
    reconciled, by the reason the operator logged (``resumed, reconciling: …``)."""
    first = startup = first_resume = last_resume = None
    reasons: Counter[str] = Counter()
    reconciling: list[float] = []
    for line in log_path.read_text(errors="replace").splitlines():
        at = _log_time(line)
        if at is None:
            continue
        rel = round(at - started, 2)
        first = rel if first is None else first
        if "Activity '" in line and "succeeded" in line and first_resume is None:
            startup = rel
        if any(m in line for m in ("Resuming is processed", "resumed, reconciling: ", "Handler '")):
            first_resume = rel if first_resume is None else first_resume  # the first resource handler
        if "Resuming is processed" in line:
            last_resume = rel
        elif "resumed, reconciling: " in line:
            reason = line.split("resumed, reconciling: ", 1)[1]
            # one bucket per test, not per object: drop the names and numbers in the reason
            reasons[" ".join(w for w in reason.split() if not any(c.isdigit() for c in w))] += 1
            reconciling.append(rel)
    return {
        "first_log_line_s": first,
        "startup_done_s": startup,
        "first_resume_s": first_resume,
        "last_resume_s": last_resume,
        "resume_reconciled": sum(reasons.values()),
        "resume_reasons": dict(reasons.most_common(10)),
    }


def handler_requests_by_phase(
    path: Path, start: int, started: float, timeline: dict[str, Any]
) -> dict[str, Any]:
    """The operator's handlers' requests (user agent ``OpenAPI-Generator/…``) in the audit log from
    byte offset ``start``: per phase of the restart (before the first resume, until the last, after)
    × verb × resource, and the first and last request of each verb × resource, in seconds after
    ``started`` (epoch seconds)."""
    first, last = timeline.get("first_resume_s"), timeline.get("last_resume_s")
    phases: Counter[str] = Counter()
    span: dict[str, list[float]] = {}
    for ev in audit_events(path, start):
        if client_of(ev.get("userAgent") or "") != "handlers" or not ev.get("requestReceivedTimestamp"):
            continue
        at = _ts(ev["requestReceivedTimestamp"]) - started
        ref = ev.get("objectRef") or {}
        what = f"{ev.get('verb', '?')} {ref.get('resource', '?')}"
        code = (ev.get("responseStatus") or {}).get("code")
        what += f" ({code})" if code and code >= 400 else ""
        phase = (
            "before the first resume"
            if first is None or at < first
            else "until the last resume"
            if last is None or at <= last
            else "after the last resume"
        )
        phases[f"{phase}: {what}"] += 1
        lo_hi = span.setdefault(what, [at, at])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], at), max(lo_hi[1], at)
    return {
        "by_phase": dict(phases.most_common()),
        "span_s": {k: [round(v[0], 1), round(v[1], 1)] for k, v in span.items()},
    }


def kopf_listings(path: Path, start: int, started: float) -> dict[str, list[float]]:
    """kopf's initial LIST of each watched resource in the audit log from byte offset ``start``:
    resource → [request received, response sent] in seconds after ``started`` (epoch seconds); the
    watch that follows starts from the list's resourceVersion."""
    out: dict[str, list[float]] = {}
    for ev in audit_events(path, start):
        if client_of(ev.get("userAgent") or "") != "kopf" or ev.get("verb") != "list":
            continue
        res = (ev.get("objectRef") or {}).get("resource") or "?"
        if res in out or not ev.get("requestReceivedTimestamp") or not ev.get("stageTimestamp"):
            continue
        out[res] = [
            round(_ts(ev["requestReceivedTimestamp"]) - started, 2),
            round(_ts(ev["stageTimestamp"]) - started, 2),
        ]
    return out


def start_py_spy(py_spy: str, pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of process ``pid`` (raw collapsed stacks of its running threads, each
    stack under its thread, into ``out``, 50 samples/s, without pausing it); stopped with SIGINT
    (py-spy writes its file then). None if it never attached (the interpreter not up within 10 s)."""
    for _ in range(20):
        spy = subprocess.Popen(
            [
                py_spy,
                "record",
                "--pid",
                str(pid),
                "--rate",
                "50",
                "--nonblocking",
                "--threads",
                "--format",
                "raw",
                "--output",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        if spy.poll() is None:
            return spy
    return None


def stop_py_spy(spy: subprocess.Popen[bytes], out: Path, top: int = 25) -> dict[str, Any]:
    """Stop ``spy`` and summarise ``out``: samples, and the functions most often on the stack
    (inclusive) and at its top (self), each as a share of the samples."""
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(120)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait(30)
    total = 0
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    for line in out.read_text(errors="replace").splitlines() if out.exists() else []:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        total += int(count)
        frames = [_frame(f) for f in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] += int(count)
        leaf[frames[-1]] += int(count)

    def share(counts: Counter[str]) -> dict[str, float]:
        return {k: round(v / total, 3) for k, v in counts.most_common(top)}

    return {"samples": total, "inclusive": share(inclusive), "self": share(leaf)}


def _frame(frame: str) -> str:
    """``function (file)`` of a py-spy frame ``function (path/to/file.py:line)``; a thread's or
    process's own entry as it is."""
    if frame.startswith(("thread (", "process ")):
        return frame
    function, _, where = frame.partition(" (")
    return f"{function} ({where.split(':')[0].rsplit('/', 1)[-1]})" if where else function


def wait_resumed(log_path: Path, objects: int, deadline: float, proc: subprocess.Popen[bytes]) -> float:
    """Seconds until kopf has logged "Resuming is processed" (every resume handler done) for
    ``objects`` distinct objects in ``log_path``, the log of an operator started just now; -1 when
    the deadline passed first."""
    t0 = time.monotonic()
    while time.monotonic() < deadline and proc.poll() is None:
        names = set()
        for line in log_path.read_text(errors="replace").splitlines():
            if "Resuming is processed" in line and "] [" in line:
                names.add(line.split("] [", 1)[1].split("]", 1)[0])
        if len(names) >= objects:
            return time.monotonic() - t0
        time.sleep(0.5)
    return -1.0


def apply(cp: ControlPlane, objs: list[dict[str, Any]], ns: str) -> tuple[float, float]:
    """``kubectl apply --server-side`` of ``objs`` into ``ns``: (wall time s, kubectl's peak RSS MiB)."""
    path = cp.work_dir / f"objects-{ns}.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    t0 = time.monotonic()
    argv = [cp.bin("kubectl"), f"--kubeconfig={cp.kubeconfig}", "apply", "--server-side", "-n", ns]
    proc = subprocess.Popen([*argv, "-f", str(path)], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (ru_maxrss in KiB on Linux)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl apply failed with exit code {proc.returncode}")
    return time.monotonic() - t0, usage.ru_maxrss / 1024


def apply_parallel(cp: ControlPlane, objs: list[dict[str, Any]], ns: str, clients: int) -> float:
    """``objs`` split round-robin into ``clients`` parts, each applied by its own ``kubectl apply
    --server-side`` at the same time (one kubectl sends one request per object, one after the other):
    wall time s until the last finished."""
    parts = [objs[i::clients] for i in range(clients)]
    t0 = time.monotonic()
    procs = []
    for i, part in enumerate(parts):
        path = cp.work_dir / f"objects-{ns}-{i}.yaml"
        path.write_text(yaml.safe_dump_all(part))
        argv = [cp.bin("kubectl"), f"--kubeconfig={cp.kubeconfig}", "apply", "--server-side", "-n", ns]
        procs.append(subprocess.Popen([*argv, "-f", str(path)], stdout=subprocess.DEVNULL))
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"kubectl apply failed with exit codes {codes}")
    return time.monotonic() - t0


def converged(custom: client.CustomObjectsApi, ns: str, n: int) -> tuple[int, int]:
    """(Ready LLMEngines, Ready LLMDeployments with all replicas ready)."""
    engines = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "llmengines")["items"]
    deps = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "llmdeployments")["items"]
    ready_e = sum(1 for e in engines if (e.get("status") or {}).get("phase") == "Ready")
    ready_d = 0
    for d in deps:
        s = d.get("status") or {}
        if s.get("phase") == "Ready" and s.get("readyReplicas") == d["spec"]["replicas"]:
            ready_d += 1
    return ready_e, ready_d


def all_handled(custom: client.CustomObjectsApi, ns: str) -> bool:
    """Whether kopf has recorded a handled configuration on every LLMEngine and LLMDeployment."""
    for plural in ("llmengines", "llmdeployments"):
        for o in custom.list_namespaced_custom_object(GROUP, VERSION, ns, plural)["items"]:
            if KOPF_DIFFBASE not in (o["metadata"].get("annotations") or {}):
                return False
    return True


def versions(custom: client.CustomObjectsApi, ns: str) -> dict[str, str]:
    out = {}
    for plural in ("llmengines", "llmdeployments"):
        for o in custom.list_namespaced_custom_object(GROUP, VERSION, ns, plural)["items"]:
            out[f"{plural}/{o['metadata']['name']}"] = o["metadata"]["resourceVersion"]
    return out


def event_sources(core: client.CoreV1Api, ns: str, since: float) -> dict[str, int]:
    """'component reason' → events (re)recorded since ``since`` (epoch s): who writes Events when idle."""
    out: Counter[str] = Counter()
    for e in core.list_namespaced_event(ns).items:
        last = e.last_timestamp or e.event_time or e.metadata.creation_timestamp
        if last is not None and last.timestamp() >= since:
            comp = (e.source.component if e.source else None) or e.reporting_component or "?"
            out[f"{comp} {e.reason}"] += 1
    return dict(out.most_common(8))


def vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


#: ``--tracemalloc``: the operator runs with benchmarks/memprofile/sitecustomize.py on its path.
MEMPROFILE = Path(__file__).resolve().parent / "memprofile"


def memory_top(proc: subprocess.Popen[bytes], path: Path) -> list[dict[str, Any]]:
    """What holds the operator's memory now (``--tracemalloc``): SIGUSR2 makes it write the live
    allocations by site (benchmarks/memprofile/sitecustomize.py); the lines of that file."""
    path.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + 300  # a snapshot of a large heap takes a while on a loaded machine
    while time.monotonic() < deadline:
        time.sleep(2)
        try:
            lines = [json.loads(x) for x in path.read_text().splitlines()]
        except (FileNotFoundError, json.JSONDecodeError):
            continue
        if len(lines) > 1:
            return list(lines)
    return []


def memory_at_peak(path: Path) -> dict[str, float]:
    """``--memory-stats``: the operator's first sample (benchmarks/memprofile/sitecustomize.py) within
    1 % of its highest RSS, in MiB — when the RSS got there: memory freed later stays in the RSS, so
    later samples of the same RSS show less in use. ``rss``; live objects: ``pymalloc_used`` (Python
    objects of up to 512 bytes) and ``glibc_used`` (larger ones, buffers, C extensions); held free:
    ``pymalloc_free`` (the part of pymalloc's arenas, ``pymalloc_arenas``, not in use: free blocks,
    empty pools; an arena goes back to the system only when all of it is free) and ``glibc_free``;
    ``glibc_mmap`` (large blocks mmapped one by one); ``file`` (file-backed pages: code); ``other``
    (the rest: thread stacks, other mappings; a few MiB below 0 when pymalloc's arenas, counted
    whole, are not all resident). ``{}`` without samples."""
    try:
        samples = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    except (OSError, json.JSONDecodeError):
        return {}
    samples = [x for x in samples if "pymalloc_arenas" in x]
    if not samples:
        return {}
    highest = max(x["rss"] for x in samples)
    peak = next(x for x in samples if x["rss"] >= 0.99 * highest)
    keys = ("rss", "pymalloc_arenas", "pymalloc_used", "glibc_used", "glibc_free", "glibc_mmap", "file")
    out = {k: peak[k] / 2**20 for k in keys}
    out["pymalloc_free"] = out["pymalloc_arenas"] - out["pymalloc_used"]
    out["other"] = out["rss"] - out["file"] - out["pymalloc_arenas"] - out["glibc_used"] - out["glibc_free"]
    out["other"] -= out["glibc_mmap"]
    return out


def memory_line(m: dict[str, float]) -> str:
    """One line of the table for :func:`memory_at_peak`."""
    if not m:
        return "no samples"
    return (
        f"RSS {m['rss']:.0f} MiB = live objects {m['pymalloc_used']:.0f} (pymalloc) + "
        f"{m['glibc_used']:.0f} (glibc malloc) MiB; held free {m['pymalloc_free']:.0f} (pymalloc, of "
        f"{m['pymalloc_arenas']:.0f} MiB of arenas) + {m['glibc_free']:.0f} (glibc) MiB; glibc mmapped "
        f"{m['glibc_mmap']:.0f} MiB; file-backed {m['file']:.0f} MiB; other {m['other']:.0f} MiB"
    )


#: The children the operator renders per one-replica, single-node LLMDeployment (what its handlers
#: create in the burst: the audit profile's "handlers create ..." rows), as (kubectl resource, kind).
CHILD_KINDS = (
    ("deployments.apps", "Deployment"),
    ("services", "Service"),
    ("poddisruptionbudgets.policy", "PodDisruptionBudget"),
    ("configmaps", "ConfigMap"),
    ("secrets", "Secret"),
    ("networkpolicies.networking.k8s.io", "NetworkPolicy"),
)
#: Fields the API server sets (or allocates) that an apply must not carry.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
)


def children_of_deployments(cp: ControlPlane, ns: str) -> list[dict[str, Any]]:
    """Every object of :data:`CHILD_KINDS` in ``ns`` owned by an LLMDeployment, as an apply body
    (no status, no server-set metadata, no allocated Service IPs), in the order of their owners
    (``d-0``'s children first: the order the burst applied the LLMDeployments in)."""
    out: list[tuple[int, dict[str, Any]]] = []
    for resource, _kind in CHILD_KINDS:
        listed = cp.kubectl("get", resource, "-n", ns, "-o", "json").stdout
        for obj in json.loads(listed)["items"]:
            meta = obj["metadata"]
            refs = meta.get("ownerReferences") or []
            owners = [r["name"] for r in refs if r.get("kind") == "LLMDeployment"]
            if not owners:
                continue
            obj.pop("status", None)
            for key in (*_SERVER_METADATA, "namespace"):
                meta.pop(key, None)
            if obj["kind"] == "Service":
                for key in ("clusterIP", "clusterIPs"):
                    obj["spec"].pop(key, None)
            out.append((int(owners[0].removeprefix("d-")), obj))
    return [obj for _, obj in sorted(out, key=lambda owned: owned[0])]


def deployments_ready(apps: client.AppsV1Api, ns: str) -> tuple[int, int]:
    """(Deployments in ``ns`` with every replica ready, Deployments in ``ns``)."""
    items = apps.list_namespaced_deployment(ns).items
    ready = [d for d in items if d.status is not None and (d.status.ready_replicas or 0) == d.spec.replicas]
    return len(ready), len(items)


def floor_step(
    cp: ControlPlane, api: client.ApiClient, metrics: Metrics, n: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Step 6 (module doc): the burst's children applied with no operator; time to every Deployment
    ready, and the API requests meanwhile. The operator must be stopped before."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    children = children_of_deployments(cp, "bench")
    kinds = Counter(c["kind"] for c in children)
    namespace(core, "floor")
    artifact_pvc(core, "floor")
    nodes = add_gpu_nodes(api, -(-int(n * 1.1) // 8) + 1, product=H100, gpus=8, prefix="floor")
    wait_nodes_ready(api, nodes, timeout=300)
    before = metrics.requests()
    audit_start = cp.audit_log.stat().st_size
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    apply_s = apply_parallel(cp, children, "floor", args.floor_clients)
    log(f"floor: {len(children)} children applied by {args.floor_clients} kubectl in {apply_s:.1f} s")
    deadline = t0 + args.timeout
    ready, total = 0, 0
    while time.monotonic() < deadline:
        try:
            ready, total = deployments_ready(apps, "floor")
        except (client.ApiException, urllib3.exceptions.HTTPError) as exc:
            log(f"  poll failed ({type(exc).__name__}); retrying")
        else:
            if total == kinds["Deployment"] and ready == total:
                break
            log(f"  floor: {ready}/{kinds['Deployment']} Deployments ready")
        time.sleep(args.poll)  # the burst's poll interval: the two times are read alike
    ready_s = time.monotonic() - t0
    requests = delta(metrics.requests(), before)
    log(f"floor: every Deployment ready after {ready_s:.1f} s")
    return {
        "children": dict(sorted(kinds.items())),
        "apply_s": apply_s,
        "clients": args.floor_clients,
        "ready_s": ready_s,
        "ready": ready,
        "deployments": kinds["Deployment"],
        "load_avg_start": load,
        "load_avg": os.getloadavg()[0],
        "requests": sum(requests.values()),
        "per_client": audit_breakdown(cp.audit_log, audit_start)["per_client"],
    }


def operator_env(
    cp: ControlPlane,
    ns: str,
    metrics_port: int,
    tracemalloc_out: Path | None = None,
    memstats_out: Path | None = None,
) -> dict[str, str]:
    extra: dict[str, str] = {}
    if tracemalloc_out is not None:
        extra["TRTLLM_BENCH_TRACEMALLOC"] = str(tracemalloc_out)
    if memstats_out is not None:
        extra["TRTLLM_BENCH_MEMSTATS"] = str(memstats_out)
    if extra:
        path = os.environ.get("PYTHONPATH")
        extra["PYTHONPATH"] = f"{MEMPROFILE}{os.pathsep}{path}" if path else str(MEMPROFILE)
    return {
        **os.environ,
        **extra,
        "KUBECONFIG": str(cp.kubeconfig),
        "TRTLLM_OPERATOR_NAMESPACES": ns,
        "TRTLLM_OPERATOR_OPERATOR_NAMESPACE": ns,
        "TRTLLM_OPERATOR_STANDALONE": "true",
        "TRTLLM_OPERATOR_LIVENESS_PORT": "",
        "TRTLLM_OPERATOR_METRICS_PORT": str(metrics_port),
        # read by this benchmark on 127.0.0.1 only; no reviews, so the API-call counts stay the
        # operator's own (a scrape with metrics auth adds a TokenReview and a SubjectAccessReview)
        "TRTLLM_OPERATOR_METRICS_AUTH": "false",
        "TRTLLM_OPERATOR_METRICS_SECURE": "false",  # plain HTTP on loopback, as read below
        "TRTLLM_OPERATOR_LISTEN_ADDRESS": "127.0.0.1",
        "TRTLLM_OPERATOR_HF_CONFIG_DIR": str(HF_CONFIG_DIR),
    }


# ----------------------------------------------------------------------------- the run
def run(args: argparse.Namespace) -> dict[str, Any]:
    n, keys = args.engines, min(args.keys, args.engines)
    work = Path(tempfile.mkdtemp(prefix="trtllm-scale-"))
    cp = ControlPlane(work_dir=work, bin_dir=find_bin_dir(), log=log, audit_policy=AUDIT_EVERY_REQUEST)
    cp.start(timeout=300)
    api = config.new_client_from_config(config_file=str(cp.kubeconfig))
    api.user_agent = BENCH_AGENT
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    metrics = Metrics(cp)
    proc: subprocess.Popen[bytes] | None = None
    result: dict[str, Any] = {"n": n, "keys": keys}
    try:
        nodes = add_gpu_nodes(api, -(-int(n * 1.1) // 8) + 1, product=H100, gpus=8, prefix="scale")
        wait_nodes_ready(api, nodes, timeout=300)
        result["nodes"] = len(nodes)
        log(f"{len(nodes)} kwok H100 nodes ready")
        objs = manifests(n, keys)
        for ns in ("baseline", "bench"):
            namespace(core, ns)
            artifact_pvc(core, ns)
            register_artifacts(core, ns, keys)

        # 1. baseline: apply only
        before = metrics.requests()
        result["baseline_s"], result["kubectl_rss_mib"] = apply(cp, objs, "baseline")
        base = delta(metrics.requests(), before)
        result["baseline_requests"] = sum(base.values())
        log(f"baseline apply: {result['baseline_s']:.1f} s, {result['baseline_requests']} requests")

        # 2. burst with the operator
        log_path = work / "operator.log"
        metrics_port = free_port()
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "trtllm_operator.cli", "run"],
                env=operator_env(
                    cp,
                    "bench",
                    metrics_port,
                    work / "tracemalloc.jsonl" if args.tracemalloc else None,
                    work / "memstats.jsonl" if args.memory_stats else None,
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        time.sleep(args.operator_warmup)
        if args.tracemalloc:
            # trace from the burst on (memprofile/sitecustomize.py), once the operator has started:
            # tracing its imports on a loaded machine made the start take minutes
            while proc.poll() is None and "Activity 'bind_indexes' succeeded" not in log_path.read_text():
                time.sleep(1)
            proc.send_signal(signal.SIGUSR1)
        before = metrics.requests()
        audit_start = cp.audit_log.stat().st_size
        result["load_avg_start"] = os.getloadavg()[0]
        t0 = time.monotonic()
        apply_s, _ = apply(cp, objs, "bench")
        log(f"burst applied in {apply_s:.1f} s")
        deadline = t0 + args.timeout
        while True:
            try:
                ready_e, ready_d = converged(custom, "bench", n)
            except (client.ApiException, urllib3.exceptions.HTTPError) as exc:  # a loaded API server
                log(f"  poll failed ({type(exc).__name__}); retrying")
                time.sleep(args.poll)
                continue
            if ready_e == n and ready_d == n:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"the operator exited ({proc.returncode}); log: {log_path}")
            if time.monotonic() > deadline:
                result["timed_out"] = True
                break
            log(f"  ready: {ready_e}/{n} engines, {ready_d}/{n} deployments")
            time.sleep(args.poll)
        result["converge_s"] = time.monotonic() - t0
        result["load_avg"] = os.getloadavg()[0]
        result["ready_engines"], result["ready_deployments"] = converged(custom, "bench", n)
        burst = delta(metrics.requests(), before)
        result["burst_requests"] = sum(burst.values())
        result["burst_writes"] = sum(writes(burst).values())
        result["burst_llm"] = {
            f"{v} {r}": c for (v, r), c in sorted(burst.items()) if r.startswith("llm") and v != "WATCH"
        }
        result["profile"] = audit_breakdown(cp.audit_log, audit_start)
        result["operator_metrics"] = operator_metrics(metrics_port)
        log(f"converged in {result['converge_s']:.1f} s, {result['burst_requests']} requests")

        # 3. idle, once kopf has finished every creation (its diff-base annotation is on every object):
        # "all Ready" can come before the last queued creation handlers ran.
        while time.monotonic() < deadline and not all_handled(custom, "bench"):
            time.sleep(args.poll)
        result["handled_s"] = time.monotonic() - t0
        log(f"every creation handled by kopf after {result['handled_s']:.1f} s")
        time.sleep(5)
        rv_before = versions(custom, "bench")
        before = metrics.requests()
        idle_start = time.time()
        time.sleep(args.idle_seconds)
        idle = writes(delta(metrics.requests(), before))
        rv_after = versions(custom, "bench")
        result["idle_s"] = args.idle_seconds
        result["idle_writes"] = sum(idle.values())
        result["idle_writes_by_resource"] = {f"{v} {r}": c for (v, r), c in sorted(idle.items())}
        result["idle_llm_writes"] = sum(c for (_, r), c in idle.items() if r.startswith("llm"))
        result["idle_changed_objects"] = sum(1 for k, v in rv_after.items() if rv_before.get(k) != v)
        result["idle_events"] = event_sources(core, "bench", since=idle_start)
        result["rss_mib"] = vm_hwm_mib(proc.pid)
        if args.memory_stats:
            result["memory_at_peak"] = memory_at_peak(work / "memstats.jsonl")
        if args.tracemalloc:
            result["memory_top"] = memory_top(proc, work / "tracemalloc.jsonl")
        log(
            f"idle {args.idle_seconds:.0f} s: {result['idle_writes']} writes "
            f"{result['idle_writes_by_resource']}"
        )

        # 5. restart with everything converged: kill the operator, start a new one, and measure the
        # time until it has resumed every object and what it wrote meanwhile.
        proc.kill()
        proc.wait(30)
        restart_log = work / "operator-restart.log"
        audit_start = cp.audit_log.stat().st_size
        rv_before = versions(custom, "bench")
        restart_port = free_port()
        result["restart_load_avg"] = os.getloadavg()[0]
        t1, t1_epoch = time.monotonic(), time.time()
        with open(restart_log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "trtllm_operator.cli", "run"],
                env=operator_env(
                    cp,
                    "bench",
                    restart_port,
                    None,
                    work / "memstats-restart.jsonl" if args.memory_stats else None,
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        spy = start_py_spy(args.py_spy, proc.pid, work / "restart-py-spy.txt") if args.py_spy else None
        result["restart_resumed_s"] = wait_resumed(restart_log, 2 * n, t1 + args.timeout, proc)
        log(f"restarted operator resumed all {2 * n} objects after {result['restart_resumed_s']:.1f} s")
        if spy is not None:
            result["restart_py_spy"] = stop_py_spy(spy, work / "restart-py-spy.txt")
        time.sleep(args.restart_settle)
        result["restart_settle_s"] = args.restart_settle
        result["restart_timeline"] = restart_timeline(restart_log, t1_epoch)
        try:
            result["restart_operator_metrics"] = operator_metrics(restart_port)
        except OSError as exc:  # the restarted operator not serving /metrics: the rest still counts
            log(f"restarted operator's /metrics unreadable: {exc}")
        result["restart_handler_requests"] = handler_requests_by_phase(
            cp.audit_log, audit_start, t1_epoch, result["restart_timeline"]
        )
        result["restart_kopf_lists"] = kopf_listings(cp.audit_log, audit_start, t1_epoch)
        result["restart_profile"] = audit_breakdown(cp.audit_log, audit_start)
        rv_after = versions(custom, "bench")
        result["restart_changed_objects"] = sum(1 for k, v in rv_after.items() if rv_before.get(k) != v)
        result["restart_rss_mib"] = vm_hwm_mib(proc.pid)
        if args.memory_stats:
            result["restart_memory_at_peak"] = memory_at_peak(work / "memstats-restart.jsonl")
        if args.floor:
            proc.kill()
            proc.wait(30)
            result["floor"] = floor_step(cp, api, metrics, n, args)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)
        api.close()
        cp.stop()
        if not args.keep:
            cp.remove()
        else:
            log(f"kept {work}")
    return result


def table(r: dict[str, Any], command: str) -> str:
    n, total = r["n"], 2 * r["n"]
    rows = [
        (
            "objects applied",
            f"{n} LLMEngines ({r['keys']} distinct engine keys) + {n} LLMDeployments (1 replica each)",
        ),
        ("kwok GPU nodes", f"{r['nodes']} × 8 H100"),
        (
            "machine: 1-minute load average at the apply / at convergence (2 cores, shared)",
            f"{r['load_avg_start']:.1f} / {r['load_avg']:.1f}",
        ),
        (
            "baseline: `kubectl apply --server-side`, no operator",
            f"{r['baseline_s']:.1f} s, {r['baseline_requests']} API requests",
        ),
        (
            "with operator: apply → all Ready",
            f"{r['converge_s']:.1f} s ({r['converge_s'] / r['baseline_s']:.1f}× the baseline apply)",
        ),
        (
            "kopf done with every creation (diff-base annotation on every object)",
            f"{r['handled_s']:.1f} s after the apply started",
        ),
        (
            "converged",
            f"{r['ready_engines']}/{n} engines Ready, {r['ready_deployments']}/{n} deployments Ready"
            + (" (TIMED OUT)" if r.get("timed_out") else ""),
        ),
        (
            "API requests during the burst (all clients)",
            f"{r['burst_requests']} ({r['burst_requests'] / total:.1f} per object; "
            f"baseline {r['baseline_requests'] / total:.1f})",
        ),
        (
            "API writes during the burst (all clients)",
            f"{r['burst_writes']} ({r['burst_writes'] / total:.1f} per object)",
        ),
        ("requests on llmengines/llmdeployments", ", ".join(f"{k}: {v}" for k, v in r["burst_llm"].items())),
        (
            "operator peak RSS (VmHWM)",
            f"{r['rss_mib']:.0f} MiB (baseline: kubectl apply's peak RSS {r['kubectl_rss_mib']:.0f} MiB)",
        ),
        *(
            [("operator memory at its highest sample (--memory-stats)", memory_line(r["memory_at_peak"]))]
            if "memory_at_peak" in r
            else []
        ),
        (
            f"API writes in {r['idle_s']:.0f} s idle (all clients)",
            f"{r['idle_writes']}"
            + (
                f" ({', '.join(f'{k}: {v}' for k, v in r['idle_writes_by_resource'].items())})"
                if r["idle_writes"]
                else ""
            ),
        ),
        (
            f"Events (re)recorded in {r['idle_s']:.0f} s idle, by component and reason",
            ", ".join(f"{k}: {v}" for k, v in r["idle_events"].items()) or "none",
        ),
        (
            f"LLMEngine/LLMDeployment writes in {r['idle_s']:.0f} s idle",
            f"{r['idle_llm_writes']} ({r['idle_changed_objects']} objects changed)",
        ),
    ]
    if "restart_profile" in r:
        rows += restart_rows(r)
    if "floor" in r:
        rows += floor_rows(r)
    lines = [f"Command: `{command}`", "", "| measure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    lines += ["", *profile_lines(r)]
    return "\n".join(lines)


def floor_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the floor step (``--floor``): Kubernetes alone on the burst's children."""
    f = r["floor"]
    clients = ", ".join(f"{k} {v}" for k, v in f["per_client"].items())
    return [
        (
            "floor: the burst's children applied with `kubectl apply --server-side`, no operator "
            f"(load {f['load_avg_start']:.1f} / {f['load_avg']:.1f})",
            ", ".join(f"{k} {v}" for k, v in f["children"].items())
            + f"; applied by {f.get('clients', 1)} kubectl at once in {f['apply_s']:.1f} s",
        ),
        (
            "floor: apply → every Deployment's replicas ready",
            f"{f['ready_s']:.1f} s ({f['ready']}/{f['deployments']}); the burst took "
            f"{r['converge_s'] / f['ready_s']:.1f}× this, "
            f"{r['converge_s'] / (f['ready_s'] + r['baseline_s']):.1f}× this plus the baseline apply",
        ),
        (
            "floor: API requests (all clients)",
            f"{f['requests']} ({f['requests'] / (2 * r['n']):.1f} per custom object of the burst): {clients}",
        ),
    ]


def restart_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the restart step: time to resume everything, and the writes of the operator."""
    reqs = r["restart_profile"]["requests"]

    def count(pred: Any) -> int:
        return sum(c for k, c in reqs.items() if pred(*k.split(" ", 2)))

    ours = ("handlers", "kopf")
    write_verbs = ("create", "update", "patch", "delete")
    status = count(lambda w, v, res: w in ours and v.split("(")[0] in write_verbs and res.endswith("/status"))
    # run's SelfSubjectAccessReviews before kopf starts (kube/access.py) are POSTs that store nothing
    children = count(
        lambda w, v, res: (
            w == "handlers"
            and v.split("(")[0] in write_verbs
            and not res.startswith(("llm", "events", "selfsubjectaccessreviews", "selfsubjectreviews"))
        )
    )
    kopf_writes = count(lambda w, v, res: w == "kopf" and v.split("(")[0] in write_verbs)
    reads = count(lambda w, v, res: w in ours and v in ("get", "list"))
    resumed = r["restart_resumed_s"]
    return [
        (
            "restart with everything converged: operator start → every object resumed",
            f"{resumed:.1f} s" if resumed >= 0 else "NOT REACHED",
        ),
        (
            f"restart: operator writes until {r['restart_settle_s']:.0f} s after that",
            f"{children} child writes, {status} status writes, {kopf_writes} kopf writes; "
            f"{reads} GET/LIST; {r['restart_changed_objects']} LLMEngine/LLMDeployment objects changed",
        ),
        ("restart: operator peak RSS", f"{r['restart_rss_mib']:.0f} MiB"),
        *(
            [("restart: operator memory at its highest sample", memory_line(r["restart_memory_at_peak"]))]
            if "restart_memory_at_peak" in r
            else []
        ),
        *restart_breakdown_rows(r),
    ]


def restart_breakdown_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """Where the restart's time went (its log), what the resume reconciled and why, what the
    handlers requested in which phase, and (``--py-spy``) where the process spent its samples."""
    t = r.get("restart_timeline")
    if not t:
        return []

    def at(key: str) -> str:
        return "—" if t.get(key) is None else f"{t[key]:.1f} s"

    m = r.get("restart_operator_metrics") or {}
    counters = ", ".join(
        f"{k.removesuffix(' total')}: {v:.0f}" for k, v in sorted(m.items()) if k.endswith(" total")
    )
    reasons = ", ".join(f"{k}: {v}" for k, v in t["resume_reasons"].items()) or "none"
    phases = r["restart_handler_requests"]["by_phase"]
    rows = [
        (
            "restart: where the time went (operator log, seconds after the process started; load "
            f"{r.get('restart_load_avg', 0.0):.1f} at the start)",
            f"first log line (interpreter, imports) {at('first_log_line_s')}; startup handlers done "
            f"{at('startup_done_s')}; first resource handler (every watched resource listed and indexed) "
            f"{at('first_resume_s')}; last resume {at('last_resume_s')}",
        ),
        (
            "restart: kopf's initial LISTs (received → answered, seconds after the process started)",
            ", ".join(f"{k} {v[0]:.1f} → {v[1]:.1f}" for k, v in (r.get("restart_kopf_lists") or {}).items())
            or "—",
        ),
        (f"restart: objects the resume reconciled ({t['resume_reconciled']}), by reason", reasons),
        ("restart: the restarted operator's counters", counters or "—"),
        (
            "restart: handlers' requests by phase",
            ", ".join(f"{k}: {v}" for k, v in phases.items()) or "none",
        ),
    ]
    spy = r.get("restart_py_spy")
    if spy:
        top = ", ".join(f"{k} {v:.0%}" for k, v in list(spy["inclusive"].items())[:12])
        rows.append((f"restart: py-spy, {spy['samples']} samples; share of samples on the stack", top))
    return rows


def profile_lines(r: dict[str, Any]) -> list[str]:
    """The burst's profile: requests and API-server seconds per client, the top client × verb ×
    resource rows, and where the operator's handler time went."""
    prof, total = r["profile"], 2 * r["n"]
    lines = [
        "Profile of the burst (kube-apiserver audit log, every request; user agent → client):",
        "",
        "| client | requests | per object | API-server seconds |",
        "|---|---|---|---|",
    ]
    for who, count in prof["per_client"].items():
        lines.append(f"| {who} | {count} | {count / total:.1f} | {prof['api_seconds'].get(who, 0.0):.1f} |")
    lines += ["", "| client verb resource | requests |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in list(prof["requests"].items())[:30]]
    top = r.get("memory_top") or []
    if top:
        mib = 1024 * 1024
        lines += [
            "",
            "Live Python allocations made since the burst began, after the idle window (tracemalloc, "
            "--tracemalloc; imports and start-up not traced): "
            f"{top[0]['traced_bytes'] / mib:.0f} MiB traced, "
            f"peak {top[0]['peak_traced_bytes'] / mib:.0f} MiB",
            "",
            "| allocated at (innermost operator/kopf frame) | MiB | blocks |",
            "|---|---|---|",
        ]
        lines += [f"| {t['site']} | {t['bytes'] / mib:.1f} | {t['blocks']} |" for t in top[1:16]]
    lines += ["", "Operator time (its /metrics at convergence):", ""]
    return lines + operator_metric_lines(r.get("operator_metrics") or {})


def operator_metric_lines(m: dict[str, float]) -> list[str]:
    """One line per histogram of :func:`operator_metrics` (observations, seconds, mean), then one
    per counter series; a counter of :data:`OPERATOR_COUNTERS` without any series (never
    incremented, e.g. no status write refused) is shown as 0."""
    lines = []
    for key in sorted(k.removesuffix(" count") for k in m if k.endswith(" count")):
        count, seconds = m[f"{key} count"], m.get(f"{key} sum", 0.0)
        mean = seconds / count if count else 0.0
        lines.append(f"- {key}: {count:.0f} observations, {seconds:.1f} s in all, {mean * 1000:.0f} ms mean")
    counters = {k.removesuffix(" total"): v for k, v in m.items() if k.endswith(" total")}
    for family in OPERATOR_COUNTERS:
        name = family.removeprefix("trtllm_operator_")
        if not any(k.startswith(name + "{") for k in counters):
            counters[name + "{}"] = 0.0
    lines += [f"- {key}: {value:.0f}" for key, value in sorted(counters.items())]
    return lines


def write_results(body: str) -> None:
    text = RESULTS.read_text()
    section = f"{BEGIN}\n## Load (benchmarks/scale.py)\n\n{body}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engines", type=int, default=1000, help="LLMEngines, and as many LLMDeployments")
    p.add_argument("--keys", type=int, default=10, help="distinct engine keys (each cached once)")
    p.add_argument("--idle-seconds", type=float, default=60.0)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for convergence")
    p.add_argument("--poll", type=float, default=5.0)
    p.add_argument("--operator-warmup", type=float, default=10.0, help="seconds for the operator to start")
    p.add_argument(
        "--restart-settle",
        type=float,
        default=20.0,
        help="seconds to keep counting writes after the restarted operator resumed everything",
    )
    p.add_argument(
        "--tracemalloc",
        action="store_true",
        help="profile what holds the operator's memory after the idle window (slower; its RSS grows)",
    )
    p.add_argument(
        "--memory-stats",
        action="store_true",
        help="split the operator's peak RSS, burst and restart: live Python objects, free in the allocators "
        "(fragmentation), code, the rest (a sample every 2 s; memory_at_peak in the result)",
    )
    p.add_argument(
        "--py-spy",
        metavar="PATH",
        help="sample the restarted operator with this py-spy executable from its start until every "
        "object resumed (restart-py-spy.txt in the work dir; the top frames in the result)",
    )
    p.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the restart, time Kubernetes alone on the burst's children (step 6 of the module doc)",
    )
    p.add_argument(
        "--floor-clients",
        type=int,
        default=8,
        help="kubectl processes applying the floor's children at the same time (the operator's handlers "
        "create children from several threads; one kubectl sends one request after the other)",
    )
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs)")
    p.add_argument("--write-results", action="store_true", help="replace the Load section of RESULTS.md")
    p.add_argument("--json", action="store_true", help="print the raw result as JSON too")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    result = run(args)
    command = ".venv/bin/python benchmarks/scale.py" + (
        "" if args.engines == 1000 else f" --engines {args.engines}"
    )
    body = (
        table(result, command)
        + f"\n\nWhole run (control plane start to stop): {time.monotonic() - t0:.0f} s.\n"
    )
    print(body)
    if args.json:
        print(json.dumps(result, indent=2))
    if args.write_results:
        write_results(body)
    ok = result["ready_engines"] == result["n"] and result["ready_deployments"] == result["n"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
