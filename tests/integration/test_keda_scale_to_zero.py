"""Audit A6 from upstream behaviour: the KEDA triggers the operator renders vanish with the last
serving pod, so a ScaledObject at ``minReplicaCount: 0`` could never wake (why admission refuses
``minReplicas: 0``, :data:`trtllm_operator.api.deployment.SCALE_TO_ZERO_REFUSAL`).

A real Prometheus (Debian's ``prometheus``; ``hack/ci-deps.sh`` installs it) scrapes one Triton
metrics emulator labelled as a serving pod (file-based discovery, as a PodMonitor would give it
``namespace``/``pod``). The rendered triggers' queries return one sample while the pod exists and
an empty result once it is gone (Prometheus marks a vanished target's series stale). What KEDA does
with that empty result is kedacore/keda v2.20.2 ``pkg/scalers/prometheus_scaler.go``:
``ExecutePromQuery`` returns 0 when ``len(result.Data.Result) == 0`` and ``ignoreNullValues`` is
true (the default; the rendered triggers do not set it), and ``GetMetricsAndActivity`` reports the
trigger active only for ``value > activationThreshold`` (default 0; not rendered either); then
``pkg/scaling/executor/scale_scaledobjects.go`` ``RequestScale`` scales a target at 0 up only while
a trigger is active. No control plane is needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.prometheus import promql, running_prometheus
from support.wait import wait_for

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.emulator import Control, Fleet
from trtllm_operator.render.keda import desired_scaled_object

NAMESPACE, NAME = "team-a", "llama"
POD = "llama-5d8c7f9b4-x2k4q"  # a Deployment pod name: <name>-<replicaset hash>-<5>
OWNER = OwnerRef(NAME, "0b6a4f3e-0000-4000-8000-000000000001")


def write_targets(path: Path, targets: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(targets))
    tmp.replace(path)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real Prometheus on 127.0.0.1 scraping the targets in the yielded file_sd file."""
    targets = tmp_path / "targets.json"
    write_targets(targets, [])
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
        "scrape_configs": [
            {"job_name": "triton", "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}]}
        ],
    }
    with running_prometheus(config, tmp_path) as url:
        yield url, targets


def test_the_rendered_triggers_return_nothing_once_the_last_serving_pod_is_gone(
    prometheus: tuple[str, Path],
) -> None:
    url, targets = prometheus
    auto = AutoscalingSpec.model_validate(
        {
            "enabled": True,
            "mode": "keda",
            "minReplicas": 1,
            "maxReplicas": 4,
            "targets": {"activeRequestUtilization": 0.7, "kvCacheUtilization": 0.8},
            "metrics": {"source": "prometheus", "prometheusURL": url},
        }
    )
    triggers = desired_scaled_object(NAME, NAMESPACE, OWNER, auto)["spec"]["triggers"]
    assert [t["name"] for t in triggers] == ["active-request-utilization", "kv-cache-utilization"]
    # neither knob that could change KEDA's reading of an empty result is rendered
    for trigger in triggers:
        assert not {"ignoreNullValues", "activationThreshold"} & set(trigger["metadata"])
    queries = {t["name"]: t["metadata"]["query"] for t in triggers}

    with Fleet(port=0, control=Control(fixed={"requests": 48, "kvCacheUtilization": 0.5})) as fleet:
        port = fleet.add("127.0.0.1").port  # bound to port 0: the kernel's pick, read back
        write_targets(
            targets, [{"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": NAMESPACE, "pod": POD}}]
        )

        def one_sample_each() -> dict[str, float] | None:
            values = {}
            for name, query in queries.items():
                result = promql(url, query)
                if len(result) != 1:
                    return None
                values[name] = float(result[0]["value"][1])
            return values

        serving = wait_for(one_sample_each, timeout=60, desc="one sample per trigger while the pod serves")
        # 48 of max 64 (the emulator's max_batch_size) active
        assert serving["active-request-utilization"] == 0.75
        assert serving["kv-cache-utilization"] == pytest.approx(0.5, abs=0.01)

        # the last serving pod goes: its target leaves discovery and its endpoint stops
        write_targets(targets, [])
        fleet.remove("127.0.0.1")

    def all_empty() -> bool:
        return all(promql(url, q) == [] for q in queries.values())

    # An empty result: what ExecutePromQuery turns into 0 (ignoreNullValues default true), which is
    # not above activationThreshold 0, so RequestScale never scales the target up from zero.
    wait_for(all_empty, timeout=60, desc="every trigger's query empty once no serving pod exists")
