"""Observability against the real control plane: the operator's /metrics endpoint, Events, progress.

One flow, operator in-process with its metrics port on 127.0.0.1: an engine builds on kwok (with
the builder's report, stage timings included), a second engine with the same key is served from
the engine cache, a third build fails (CompileFailed), a fourth spec is invalid; an LLMDeployment
then rolls out on the built engine. The test scrapes ``/metrics`` before and after (the registry
is process-wide, so it compares deltas), parses it with prometheus_client's own text parser, and
lists the Events of every object: each reason is one documented in docs/observability.md
(``trtllm_operator.events``), and the expected ones are there.

Builder pods on kwok have no log (no kubelet): the build-progress timer must fall back to the
coarse stage without crashing, and the failed log reads are counted as API errors (verb ``log``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.api import Api, wait_serving
from support.cluster import LocalCluster
from support.manifests import (
    a_cached_engine,
    a_deployment,
    an_autoscaled_deployment,
    an_engine,
    create_token_secret,
    success_report,
)
from support.metrics_auth import delete_metrics_reader, get_metrics, metrics_tokens
from support.operator import operator_process, running_operator
from support.ports import free_port
from support.wait import wait_for

from trtllm_operator import events
from trtllm_operator.emulator import Control, Fleet
from trtllm_operator.handlers import autoscaler as autoscaler_handlers

pytestmark = pytest.mark.slow

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int, token: str) -> Samples:
    """Every sample of the operator's /metrics (HTTPS, the default): (name, labels) → value.
    ``token``: of a ServiceAccount allowed to get /metrics (the exporter asks the API server, #24)."""
    status, text = get_metrics(port, token=token)
    assert status == 200, (status, text)
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    return samples.get((metric, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="session")
def operator_metrics_port() -> int:
    """The in-process operator's metrics port. Its exporter starts once per process (commands/run.py)
    and keeps that port, so every test here uses this one, chosen when first asked for (not at
    import). The exporter binds it itself: support.ports.free_port's residual race applies."""
    return free_port()


@pytest.fixture
def reader_token(cluster: LocalCluster, namespace: str) -> Iterator[str]:
    """A token of a ServiceAccount bound to the metrics-reader rule (support.metrics_auth)."""
    yield metrics_tokens(cluster, namespace).reader
    delete_metrics_reader(cluster, namespace)


@pytest.fixture
def api(cluster: LocalCluster, namespace: str) -> Iterator[Api]:
    a = Api(cluster, namespace)
    with a.artifact_pvc():
        create_token_secret(a.core, namespace)
        yield a


def test_metrics_events_and_progress_during_build_and_rollout(
    cluster: LocalCluster, api: Api, operator_metrics_port: int, reader_token: str
) -> None:
    port = operator_metrics_port
    built = an_engine("built").pvc("engines", "trtllm")
    prepared = built.prepared()
    built.succeeds(success_report(prepared)).runs_for(4000)
    reused = an_engine("reused").pvc("engines", "trtllm")  # same key and storage as "built"
    failing = an_engine("failing").max_batch_size(32).fails(17, "trtllm-build exited 1")
    invalid = an_engine("invalid").on("NVIDIA-Z9000")

    with running_operator(cluster, [api.ns], metrics_port=port, build_progress_seconds=1.0):
        before = scrape(port, reader_token)
        api.create(built)
        api.create(failing)
        api.create(invalid)

        # While the builder pod runs: the coarse stage (kwok has no pod logs), shown by kubectl.
        wait_for(
            lambda: (api.engine("built").get("status") or {}).get("build", {}).get("stage") == "running",
            timeout=30,
            desc="build stage running",
        )
        wait_for(
            lambda: value(scrape(port, reader_token), "trtllm_operator_builds", state="active") >= 1,
            timeout=10,
            desc="builds{state=active} >= 1 while building",
        )
        table = cluster.kubectl("get", "llmengine", "built", "-n", api.ns).stdout
        header, row = table.splitlines()[:2]
        assert header.split()[:4] == ["NAME", "PHASE", "STAGE", "PROGRESS"], table
        assert row.split()[1:3] == ["Building", "running"], table

        api.wait_phase("built", "Ready", timeout=40)
        api.wait_phase("failing", "Failed", timeout=40)
        api.create(reused)
        api.wait_phase("reused", "Ready", timeout=20)
        row = cluster.kubectl("get", "llmengine", "built", "-n", api.ns, "--no-headers").stdout.split()
        assert row[1:4] == ["Ready", "done", "100"], row

        api.create(a_deployment("chat", "built", replicas=2))
        wait_for(
            lambda: (
                api.status("chat").get("phase") == "Ready" and api.status("chat").get("readyReplicas") == 2
            ),
            timeout=60,
            desc="chat Ready with 2 replicas",
        )
        # The reconcile that wrote "Ready" is counted when it returns, just after its status write:
        # wait until that count is in too, not only the failed build.
        after = wait_for(
            lambda: (
                s
                if value(
                    s := scrape(port, reader_token),
                    "trtllm_operator_builds_finished_total",
                    result="failed",
                    reason="CompileFailed",
                )
                > value(
                    before, "trtllm_operator_builds_finished_total", result="failed", reason="CompileFailed"
                )
                and value(s, "trtllm_operator_reconciles_total", kind="LLMDeployment", result="success")
                - value(before, "trtllm_operator_reconciles_total", kind="LLMDeployment", result="success")
                >= 2
                else None
            ),
            timeout=10,
            desc="failed build and the LLMDeployment's reconciles counted",
        )

        def delta(metric: str, /, **labels: str) -> float:
            return value(after, metric, **labels) - value(before, metric, **labels)

        # reconciles by kind and result, with durations
        assert delta("trtllm_operator_reconciles_total", kind="LLMEngine", result="success") >= 3
        assert delta("trtllm_operator_reconciles_total", kind="LLMEngine", result="invalid") >= 1
        assert delta("trtllm_operator_reconciles_total", kind="LLMDeployment", result="success") >= 2
        for kind in ("LLMEngine", "LLMDeployment"):
            count = delta("trtllm_operator_reconcile_duration_seconds_count", kind=kind)
            assert count >= 1
            # A sanity bound on what is recorded (seconds of a reconcile, not an epoch timestamp or
            # nanoseconds), not a time budget: a mean of a minute per reconcile is a fault on however
            # busy a machine (issue 23 item 5: budgets live in benchmarks/).
            assert 0 < delta("trtllm_operator_reconcile_duration_seconds_sum", kind=kind) < 60 * count
        # builds: finished by result and reason (each transition counted once), stage durations
        # from the builder's report (fetch 1.5, quantize 12.25, compile 30, package 0.5 s)
        assert delta("trtllm_operator_builds_finished_total", result="succeeded", reason="Succeeded") == 1
        assert delta("trtllm_operator_builds_finished_total", result="failed", reason="CompileFailed") == 1
        assert delta("trtllm_operator_build_stage_duration_seconds_count", stage="compile") == 1
        assert delta("trtllm_operator_build_stage_duration_seconds_sum", stage="compile") == pytest.approx(
            30.0
        )
        assert delta("trtllm_operator_build_stage_duration_seconds_sum", stage="quantize") == pytest.approx(
            12.25
        )
        assert value(after, "trtllm_operator_builds", state="active") == 0  # both Jobs ended
        assert value(after, "trtllm_operator_builds", state="queued") == 0
        # engine cache: "reused" was a hit, "built" and "failing" misses
        assert delta("trtllm_operator_engine_cache_lookups_total", result="hit") == 1
        assert delta("trtllm_operator_engine_cache_lookups_total", result="miss") == 2
        # the progress timer tried the kwok pod's log: refused, counted, and the operator went on
        log_errors = sum(
            v - before.get(k, 0.0)
            for k, v in after.items()
            if k[0] == "trtllm_operator_api_errors_total" and ("verb", "log") in k[1]
        )
        assert log_errors >= 1

        # Events: every reason the operator posted is documented; the expected ones are there.
        posted: dict[str, set[str]] = {}
        for e in api.core.list_namespaced_event(api.ns).items:
            if (e.reporting_component or (e.source.component if e.source else "")) == "trtllm-operator":
                posted.setdefault(e.involved_object.name, set()).add(e.reason)
        documented = events.reasons()
        undocumented = {(obj, r) for obj, reasons in posted.items() for r in reasons if r not in documented}
        assert not undocumented, undocumented
        expected: dict[str, set[str]] = {
            "built": {"BuildStarted", "BuildSucceeded", "ArtifactRecorded"},
            "reused": {"ArtifactReused"},
            "failing": {"CompileFailed"},
            "invalid": {"InvalidSpec"},
            "chat": {"ReplicasStarting", "AllReplicasReady"},
        }
        for obj, reasons in expected.items():
            assert reasons <= posted.get(obj, set()), (obj, posted.get(obj))


def test_scrape_parses_prometheus_text() -> None:
    """The helper reads what prometheus_client writes (guards the assertions above)."""
    from prometheus_client import CollectorRegistry, Counter, generate_latest  # noqa: PLC0415

    registry = CollectorRegistry()
    Counter("x_events", "help", ["reason"], registry=registry).labels("A").inc(2)
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for f in text_string_to_metric_families(generate_latest(registry).decode())
        for s in f.samples
    }
    assert value(samples, "x_events_total", reason="A") == 2
    assert value(samples, "x_events_total", reason="B") == 0


def test_trtllm_operator_run_logs_json_keyed_by_object(
    cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """``trtllm-operator run`` with log format json (a subprocess, its real logging set-up): every
    line is one JSON object, and the lines about an LLMEngine carry its namespace and name."""
    api = Api(cluster, namespace)
    log_path = tmp_path / "operator.log"
    with operator_process(cluster, [namespace], log_path, log_format="json") as proc:
        api.create(an_engine("unfit").on("NVIDIA-Z9000"))
        api.wait_phase("unfit", "Failed", timeout=30)
        wait_for(lambda: '"name": "unfit"' in proc.log(), timeout=10, desc="a log line about the LLMEngine")
        text = proc.log()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(x) for x in lines), text[-2000:]
    about = [x for x in lines if x.get("name") == "unfit"]
    assert about and all(x["namespace"] == namespace for x in about)
    assert {x["logger"] for x in about} & {"kopf.objects", "trtllm_operator.handlers.engine"}


@pytest.fixture
def scaling(
    cluster: LocalCluster, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Api, Fleet]]:
    """An engine served from the cache and Triton metrics emulators on every Running pod (as in
    test_autoscaling.py), idle."""
    api = Api(cluster, namespace)
    port = free_port()
    monkeypatch.setattr(autoscaler_handlers, "METRICS_PORT", port)
    with (
        api.artifact_pvc(),
        Fleet(port=port, control=Control(fixed={"requests": 0, "kvCacheUtilization": 0.2})) as fleet,
    ):
        engine = a_cached_engine("llama")
        api.cache_artifact(engine)
        api.create(engine)
        with api.follow_pods(fleet):
            yield api, fleet


def test_autoscaler_metrics_and_events(
    cluster: LocalCluster,
    scaling: tuple[Api, Fleet],
    operator_metrics_port: int,
    reader_token: str,
) -> None:
    """Built-in autoscaler under load (Triton metrics emulators on the kwok pods): the desired and
    current replica gauges of the LLMDeployment and the decisions by reason move; ScaledUp is posted."""
    api, fleet = scaling
    fast = {"stabilizationWindowSeconds": 1, "maxReplicasPerStep": 4, "periodSeconds": 1}
    slow = {"stabilizationWindowSeconds": 600, "maxReplicasPerStep": 1, "periodSeconds": 60}
    api.create(an_autoscaled_deployment("chat", "llama", max_replicas=2, up=fast, down=slow))
    labels = {"namespace": api.ns, "name": "chat"}
    port = operator_metrics_port
    with running_operator(cluster, [api.ns], metrics_port=port):
        wait_serving(api, fleet, "chat", 1)
        before = scrape(port, reader_token)
        assert value(before, "trtllm_operator_autoscaler_current_replicas", **labels) == 1
        assert value(before, "trtllm_operator_autoscaler_desired_replicas", **labels) == 1
        api.set_load(fleet, requests=80, kvCacheUtilization=0.5)  # active capped at max 64: saturated
        wait_for(lambda: api.replicas("chat") == 2, timeout=30, desc="scale-up to 2")
        after = wait_for(
            lambda: (
                s
                if value(
                    s := scrape(operator_metrics_port, reader_token),
                    "trtllm_operator_autoscaler_current_replicas",
                    **labels,
                )
                == 2
                else None
            ),
            timeout=15,
            desc="current replicas gauge at 2",
        )
        assert value(after, "trtllm_operator_autoscaler_desired_replicas", **labels) == 2

        decisions = "trtllm_operator_autoscaler_decisions_total"
        moved = {
            dict(by)["reason"]: after[(name, by)] - before.get((name, by), 0.0)
            for name, by in after
            if name == decisions
        }
        # the tick that scaled 1 → 2 counted its reason
        assert moved.get("AboveTarget", 0.0) + moved.get("TooManyReplicas", 0.0) >= 1, moved
        # the current-replicas gauge reads 2 only once a tick has started from 2 replicas, and that
        # tick counts its decision too (handlers/autoscaler.py sets the gauge from the decision's
        # from_replicas beside the counter's inc): two decisions at least. The second one's reason
        # depends on timing — TooManyReplicas at the cap once the new pod is Ready and saturated,
        # PodsNotReady or AwaitingPods while it starts (a loop pass on a loaded machine saw one of
        # those; the assertion that named only three reasons failed there) — so it is not pinned.
        assert sum(moved.values()) >= 2, moved
        reasons = {
            e.reason
            for e in api.core.list_namespaced_event(api.ns, field_selector="involvedObject.name=chat").items
            if e.involved_object.kind == "LLMDeployment"
        }
        assert "ScaledUp" in reasons and reasons <= events.reasons(), reasons
