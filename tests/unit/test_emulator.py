"""The Triton metrics emulator: exact families, the load model, control inputs, HTTP, CLI."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from support.ports import free_port

from trtllm_operator.emulator import (
    Control,
    ControlServer,
    Fleet,
    LoadFileWatcher,
    ReplicaState,
    ServingProfile,
)
from trtllm_operator.emulator.exposition import TritonCollector, families, render
from trtllm_operator.metrics.signals import signals_from_text

REPO = Path(__file__).resolve().parents[2]
#: A real Triton 2.51 page (CPU stand-in for the engine) captured under load by the fidelity tier
#: (docs/triton-cpu.md "Captured exposition"). This machine has no GPU, so it lacks Triton core's
#: per-GPU families; the emulator exports those as a GPU server does (:data:`GPU_ONLY`).
SAMPLE = (REPO / "tests/fixtures/triton_metrics_cpu_standin_partial.txt").read_text()
#: Families a GPU server exports and the CPU capture cannot: Triton core's per-GPU families (core
#: ``src/metrics.cc``, DCGM) and the TensorRT-LLM backend's disaggregated-serving and token-length
#: families (reference tensorrt-llm.md §5).
GPU_ONLY = {
    "nv_gpu_utilization",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_power_usage",
    "nv_trt_llm_disaggregated_serving_metrics",
    "nv_llm_input_token_len",
    "nv_llm_output_token_len",
}
CATEGORY_LABELS = {"model", "version", "gpu_uuid", "le"}


def shape(text: str) -> dict[tuple[str, str, str], set[tuple[tuple[str, str], ...]]]:
    """(family, type, HELP) → the set of label sets, ignoring values of model-free labels like gpu_uuid."""
    out: dict[tuple[str, str, str], set[tuple[tuple[str, str], ...]]] = {}
    for fam in text_string_to_metric_families(text):
        key = (fam.name, fam.type, fam.documentation)
        for s in fam.samples:
            labels = {k: ("*" if k == "gpu_uuid" else v) for k, v in s.labels.items()}
            out.setdefault(key, set()).add((("__name__", s.name), *sorted(labels.items())))
    return out


def page(state: ReplicaState | None = None, control: Control | None = None) -> str:
    return render(families(state or ReplicaState(), control or Control(), "GPU-x"))


def test_families_names_types_help_and_labels_match_the_real_server() -> None:
    """Every family of the real server's page, with its type, HELP and label sets; nothing else
    but the GPU-only families."""
    emulated, real = shape(page()), shape(SAMPLE)
    assert {k: v for k, v in emulated.items() if k[0] not in GPU_ONLY} == real
    assert {k[0] for k in emulated} - {k[0] for k in real} == GPU_ONLY


def test_families_come_in_the_real_servers_order() -> None:
    def order(text: str) -> list[str]:
        return [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]

    assert [n for n in order(page()) if n not in GPU_ONLY] == order(SAMPLE)


def test_sample_lines_are_written_as_triton_writes_them() -> None:
    """Bare counter names and sorted label names, as prometheus-cpp writes them: every sample line of
    the real page (value aside) is on the emulator's page."""

    def lines(text: str) -> set[str]:
        return {line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}

    assert lines(SAMPLE) <= lines(page())


def test_prometheus_client_registry_accepts_the_collector() -> None:
    registry = CollectorRegistry()
    registry.register(TritonCollector(ReplicaState(), Control(), "GPU-x"))
    names = {m.name for m in registry.collect()}
    assert {
        "nv_trt_llm_request_metrics",
        "nv_trt_llm_kv_cache_block_metrics",
        "nv_inference_pending_request_count",
    } <= names


def test_signals_read_back_from_the_page() -> None:
    # The load model's 7.4 queued + 40 running = 47 requests in the executor, 40 scheduled; max is
    # max_batch_size 64, so active = min(47, 64) = 47 and waiting = active − scheduled = 7
    # (tensorrtllm_backend v0.19.0 model_instance_state.cc WaitForStats).
    state = ReplicaState(waiting=7.4, active=40)
    signals = signals_from_text(page(state))
    assert signals.waiting == 7
    assert signals.active_request_utilization == 47 / 64
    assert signals.kv_cache_utilization == pytest.approx(
        40 * state.profile.blocks_per_request / state.profile.kv_blocks
    )


def test_active_is_capped_at_max_and_the_executor_queue_is_not_exported() -> None:
    # 200 requests held, max 64: active 64, scheduled 64 → waiting 0; the other 136 are not on the page.
    text = page(control=Control(fixed={"requests": 200, "scheduled": 64}))
    values = {
        s.labels["request_type"]: s.value
        for fam in text_string_to_metric_families(text)
        if fam.name == "nv_trt_llm_request_metrics"
        for s in fam.samples
    }
    assert (values["active"], values["max"], values["scheduled"], values["waiting"]) == (64, 64, 64, 0)
    assert "136" not in {line.rsplit(" ", 1)[-1] for line in text.splitlines()}


@pytest.mark.parametrize(
    ("control", "active", "waiting", "kv"),
    [
        # 30 held, 18 scheduled: active = min(30, 64) = 30, waiting = 30 − 18 = 12
        (Control(fixed={"requests": 30, "scheduled": 18, "kvCacheUtilization": 0.9}), 30 / 64, 12.0, 0.9),
        # an older backend without nv_trt_llm_request_metrics: no saturation signal at all
        (Control(fixed={"requests": 30}, omit=frozenset({"nv_trt_llm_request_metrics"})), None, None, 0.0),
        (Control(omit=frozenset({"nv_trt_llm_kv_cache_block_metrics"})), 0.0, 0.0, None),
    ],
    ids=["fixed state", "no request family", "no KV family"],
)
def test_control_pins_and_omits(
    control: Control, active: float | None, waiting: float | None, kv: float | None
) -> None:
    signals = signals_from_text(page(control=control))
    assert (signals.active_request_utilization, signals.waiting, signals.kv_cache_utilization) == (
        active,
        waiting,
        kv,
    )


def test_profile_arithmetic() -> None:
    p = ServingProfile()
    assert (p.blocks_per_request, p.max_active) == (20, 64)
    assert p.request_seconds == pytest.approx(0.2 + 256 / 40)
    assert p.capacity_rps == pytest.approx(64 / 6.6)
    assert ServingProfile(kv_blocks=400).max_active == 20  # KV-bound: 400 // 20


def run_model(
    rate: float, seconds: float, dt: float = 0.05, state: ReplicaState | None = None
) -> ReplicaState:
    state = state or ReplicaState()
    for _ in range(round(seconds / dt)):
        state.step(rate, dt)
    return state


def test_below_capacity_no_queue_and_littles_law() -> None:
    p = ServingProfile()
    state = run_model(0.5 * p.capacity_rps, 120)
    assert state.waiting < 1e-9
    assert state.active == pytest.approx(0.5 * p.capacity_rps * p.request_seconds, rel=0.01)


def test_above_capacity_queue_grows_by_the_excess_and_kv_saturates() -> None:
    p = ServingProfile()
    rate = p.capacity_rps + 2.0
    state = run_model(rate, 60)
    assert state.active == pytest.approx(p.max_active)
    # Before saturation active = λT(1 − e^(−t/T)); it reaches max_active at t_sat, and from then on
    # the queue grows by the excess λ − capacity.
    t_sat = p.request_seconds * math.log(rate * p.request_seconds / (rate * p.request_seconds - p.max_active))
    assert state.waiting == pytest.approx(2.0 * (60 - t_sat), rel=0.02)
    assert state.kv_used_blocks / p.kv_blocks == pytest.approx(0.8)
    drained = run_model(0.0, 300, state=state)
    assert drained.waiting < 1 and drained.active < 1


def test_max_queue_size_rejects() -> None:
    state = run_model(100.0, 10, state=ReplicaState(ServingProfile(max_queue_size=10)))
    assert state.waiting <= 10 and state.rejected > 0
    assert 'model="tensorrt_llm",reason="REJECTED",version="1"} 0' not in page(state)
    assert f'model="tensorrt_llm",reason="REJECTED",version="1"}} {round(state.rejected)}' in page(state)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"arrivalRate": -1}, "arrivalRate"),
        ({"rate": 3}, "unknown control key"),
        ({"fixed": {"queue": 3}}, "unknown fixed gauge"),
        ({"fixed": {"waiting": 3}}, "waiting is derived"),
        ({"fixed": {"pending": 3}}, "pending count is 0"),
        ({"fixed": {"requests": 3, "scheduled": 4}}, "exceeds fixed.requests"),
        ({"fixed": {"kvCacheUtilization": 2}}, "fraction"),
        ({"endpoints": {"127.1.0.5": {"arrivalRate": 3}}}, "unknown control key"),
        ([1, 2], "mapping"),
    ],
)
def test_bad_control_documents(doc: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Control.from_dict(doc)  # type: ignore[arg-type]


def test_control_round_trip_and_per_endpoint_override() -> None:
    doc = {"arrivalRate": 3.0, "fixed": {"requests": 2.0}, "endpoints": {"127.1.0.5": {"unavailable": True}}}
    control = Control.from_dict(doc)
    assert control.to_dict() == doc
    assert control.for_endpoint("127.1.0.5").unavailable
    assert not control.for_endpoint("127.1.0.6").unavailable


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with Fleet(port=0, tick_seconds=0.02) as f:
        yield f


def test_fleet_serves_each_address_and_splits_load(fleet: Fleet) -> None:
    a = fleet.add("127.1.250.1")
    b = fleet.add("127.1.250.2")
    assert fleet.add("127.1.250.1") is a
    fleet.step(10.0)  # no load yet
    fleet.set_control(Control(arrival_rate=2.0))
    fleet.step(1.0)
    assert a.state.active == pytest.approx(1.0) and b.state.active == pytest.approx(1.0)
    status, text = get(f"http://127.1.250.1:{a.port}/metrics")
    assert (
        status == 200
        and 'nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"}' in text
    )
    assert get(f"http://127.1.250.1:{a.port}/v2/health/ready")[0] == 404
    fleet.set_control(Control(endpoints={"127.1.250.2": Control(unavailable=True)}))
    assert get(f"http://127.1.250.2:{b.port}/metrics")[0] == 503
    fleet.remove("127.1.250.2")
    assert fleet.addresses() == ["127.1.250.1"]
    with pytest.raises(OSError):
        socket.create_connection(("127.1.250.2", b.port), timeout=1).close()


def test_control_server(fleet: Fleet) -> None:
    server = ControlServer(fleet, 0).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        req = urllib.request.Request(f"{base}/endpoints", data=b'{"address": "127.1.250.3"}', method="POST")
        assert urllib.request.urlopen(req, timeout=5).status == 201
        body = b'{"fixed": {"kvCacheUtilization": 0.75}}'
        req = urllib.request.Request(f"{base}/load", data=body, method="PUT")
        assert json.loads(urllib.request.urlopen(req, timeout=5).read()) == {
            "arrivalRate": 0.0,
            "fixed": {"kvCacheUtilization": 0.75},
        }
        endpoint = fleet.endpoint("127.1.250.3")
        assert endpoint is not None
        page = get(f"http://127.1.250.3:{endpoint.port}/metrics")[1]
        assert signals_from_text(page).kv_cache_utilization == 0.75
        req = urllib.request.Request(f"{base}/load", data=b'{"arrivalRate": -2}', method="PUT")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 400
        state = json.loads(get(f"{base}/state")[1])
        assert list(state["endpoints"]) == ["127.1.250.3"]
        req = urllib.request.Request(f"{base}/endpoints/127.1.250.3", method="DELETE")
        assert json.loads(urllib.request.urlopen(req, timeout=5).read()) == {"addresses": []}
    finally:
        server.stop()


def test_load_file_watcher(fleet: Fleet, tmp_path: Path) -> None:
    path = tmp_path / "load.yaml"
    watcher = LoadFileWatcher(fleet, path)
    watcher.check()  # missing file: keep the default
    assert fleet.control == Control()
    path.write_text("arrivalRate: 12\nfixed: {kvCacheUtilization: 0.5}\n")
    watcher.check()
    assert fleet.control.arrival_rate == 12 and fleet.control.fixed == {"kvCacheUtilization": 0.5}
    path.write_text("arrivalRate: lots\n")
    os.utime(path, (time.time() + 5, time.time() + 5))
    watcher.check()  # bad file: logged, previous control kept
    assert fleet.control.arrival_rate == 12


def test_cli_serves_until_sigterm(tmp_path: Path) -> None:
    port = free_port("127.1.250.9")  # the CLI binds it itself: support.ports.free_port's residual race
    load = tmp_path / "load.json"
    load.write_text('{"fixed": {"kvCacheUtilization": 0.25}}')
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trtllm_operator.emulator",
            "--bind",
            "127.1.250.9",
            "--port",
            str(port),
            "--load-file",
            str(load),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120  # the CLI starts a Python process: slow on a loaded machine
        text = ""
        while time.monotonic() < deadline:
            try:
                text = get(f"http://127.1.250.9:{port}/metrics")[1]
                break
            except OSError:
                time.sleep(0.1)
        assert signals_from_text(text).kv_cache_utilization == 0.25
        load.write_text('{"fixed": {"kvCacheUtilization": 0.5}}')
        os.utime(load, (time.time() + 5, time.time() + 5))
        while (
            time.monotonic() < deadline
            and signals_from_text(get(f"http://127.1.250.9:{port}/metrics")[1]).kv_cache_utilization != 0.5
        ):
            time.sleep(0.1)
        assert signals_from_text(get(f"http://127.1.250.9:{port}/metrics")[1]).kv_cache_utilization == 0.5
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out


def test_cli_rejects_bad_profile() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trtllm_operator.emulator", "--kv-blocks", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "--kv-blocks" in proc.stderr
