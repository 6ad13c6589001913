"""Property-based fuzzing of LLMEngine and LLMDeployment specs against the real API server and operator.

Each hypothesis example starts from a valid manifest and applies 1–3 mutations drawn from the CRD's own
OpenAPI schema (crds/*.yaml): a leaf set to a valid value (enum member, in-range number, a sensible
string) or an invalid one (out of range, wrong type, unknown enum value, too long, null), a required
field removed, or an unknown field added. The manifest is sent with ``fieldValidation=Strict``.

Properties, for every example:

* rejected at admission → the API's message names the offending field (``spec.…``);
* accepted → the running operator gives it a status with conditions for its generation, and every
  condition that is not True carries a reason and a message; a Ready=False ``InvalidSpec`` message starts
  with a field path and names the path of a mutated field (as a rejection at admission does);
* the operator never crashes (thread alive, no ERROR log record with a traceback) and never hot-loops:
  after convergence a quiet window comes, one in which no object is written more than
  ``MAX_WRITES_IN_WINDOW`` times (counted from a watch on both kinds), within ``QUIET_DEADLINE_SECONDS``.
  A hot loop never stops, so no such window comes; writes that follow a real change outside the
  objects (the previous test's nodes and namespace going away on a loaded CI machine change the
  scheduler's message an Unschedulable engine reports) stop once it settles.

Deterministic: ``derandomize=True`` (examples derived from the test's source), no example database.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from support.cluster import LocalCluster
from support.manifests import DELAY_MS, OUTCOME, a_deployment, an_engine
from support.messages import names_a_mutated_field
from support.operator import running_operator
from support.wait import wait_for

from trtllm_operator.api import ENGINE_PLURAL, GROUP, VERSION

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = "llmdeployments"
MAX_EXAMPLES = 70  # per kind; ~1 minute in all on a 2-core machine
QUIET_WINDOW_SECONDS = 12.0
MAX_WRITES_IN_WINDOW = 2  # a settled object is written at most this often in the window (resync is 10 s)
QUIET_DEADLINE_SECONDS = 120.0  # windows are watched back to back until one is quiet, at most this long
# Not fuzzed: the kwok outcome annotations keep every accepted build short (no GPU held afterwards).
FROZEN = ("spec.gpu.podAnnotations",)


# ----------------------------------------------------------------------------- strategies from the CRD
def _spec_schema(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((REPO_ROOT / "crds" / f"{GROUP}_{plural}.yaml").read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _fields(
    schema: dict[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every field below ``schema`` (objects too, so that whole sub-objects get replaced or removed)."""
    out: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    for key, sub in (schema.get("properties") or {}).items():
        p = (*path, key)
        if ".".join(("spec", *p)).startswith(FROZEN):
            continue
        out.append((p, sub))
        if sub.get("type") == "object":
            out.extend(_fields(sub, p))
    return out


SENSIBLE_STRINGS = st.sampled_from(
    [
        "x",
        "a-b",
        "hf://org/model",
        "s3://bucket/p",
        "NVIDIA-H100-80GB-HBM3",
        "8Gi",
        "500m",
        "1.5",
        "http://h:1",
    ]
)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
    st.text(min_size=600, max_size=700),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(min_size=1, max_size=5), st.integers(), max_size=2),
)


def _valid(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        return st.integers(schema.get("minimum", 0), schema.get("maximum", 10**6))
    if kind == "number":
        return st.floats(schema.get("minimum", 0.0), schema.get("maximum", 10.0), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        return SENSIBLE_STRINGS
    if kind == "object" and "additionalProperties" in schema:
        return st.dictionaries(st.sampled_from(["a", "b.example.com/c"]), SENSIBLE_STRINGS, max_size=2)
    return st.just({}) if kind == "object" else st.just([])


def _invalid(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    options: list[st.SearchStrategy[Any]] = [JUNK]
    if "enum" in schema:
        options.append(st.sampled_from(["bogus", "FP8", ""]))
    if "minimum" in schema:
        options.append(st.just(schema["minimum"] - 1))
    if "maximum" in schema:
        options.append(st.just(schema["maximum"] + 1))
    return st.one_of(options)


@st.composite
def mutated(
    draw: st.DrawFn, base: dict[str, Any], fields: list[tuple[tuple[str, ...], dict[str, Any]]]
) -> Any:
    """``base`` with 1–3 schema-guided mutations; returns (manifest, list of what was done)."""
    body = copy.deepcopy(base)
    done = []
    for _ in range(draw(st.integers(1, 3))):
        path, schema = draw(st.sampled_from(fields))
        action = draw(st.sampled_from(["valid", "valid", "valid", "invalid", "remove", "unknown"]))
        parent = body["spec"]
        created = False
        for depth, key in enumerate(path[:-1], start=1):
            nxt = parent.get(key)
            if not isinstance(nxt, dict):
                nxt = {}
                parent[key] = nxt
                if not created:  # an enclosing object made (or replaced) here: a mutation of its own
                    done.append(("create", "spec." + ".".join(path[:depth])))
                    created = True
            parent = nxt
        leaf = path[-1]
        if action == "remove":
            parent.pop(leaf, None)
        elif action == "unknown":
            parent["notAField"] = draw(SENSIBLE_STRINGS)
            path = (*path[:-1], "notAField")  # the field that was added
        else:
            parent[leaf] = draw(_valid(schema) if action == "valid" else _invalid(schema))
        done.append((action, "spec." + ".".join(path)))
    return body, done


def engine_base() -> dict[str, Any]:
    body = an_engine("base").pod(**{OUTCOME: "succeed", DELAY_MS: "100"}).manifest()
    body["spec"]["gpu"].pop("backoffLimit", None)
    return body


def deployment_base() -> dict[str, Any]:
    return a_deployment("base", "e-0")


# ----------------------------------------------------------------------------- operator log guard
class ErrorRecords(logging.Handler):
    """Collects ERROR+ log records that carry a traceback (an unhandled exception in a handler)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@pytest.fixture
def error_records() -> Iterator[ErrorRecords]:
    handler = ErrorRecords()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


# ----------------------------------------------------------------------------- the test
def test_fuzzed_specs_are_rejected_or_reported_and_the_operator_stays_calm(
    cluster: LocalCluster, namespace: str, error_records: ErrorRecords
) -> None:
    custom = client.CustomObjectsApi(cluster.api)
    accepted: dict[str, list[tuple[str, list[tuple[str, str]]]]] = {ENGINE_PLURAL: [], DEPLOYMENTS: []}
    rejected: Counter[str] = Counter()
    counter = iter(range(10**6))

    def send(plural: str, case: tuple[dict[str, Any], list[tuple[str, str]]]) -> None:
        body, done = case
        name = f"{'e' if plural == ENGINE_PLURAL else 'd'}-{next(counter)}"
        body["metadata"] = {"name": name}
        try:
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, body, field_validation="Strict"
            )
        except ApiException as exc:
            assert exc.status in (400, 422), (exc.status, exc.body, done)
            message = str(exc.body)
            assert names_a_mutated_field(message, done), (
                f"rejection does not name the path of a mutated field: {message} for {done}"
            )
            rejected[plural] += 1
            return
        accepted[plural].append((name, done))

    fuzz = settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )

    @fuzz
    @given(mutated(engine_base(), _fields(_spec_schema(ENGINE_PLURAL))))
    def fuzz_engines(case: tuple[dict[str, Any], list[tuple[str, str]]]) -> None:
        send(ENGINE_PLURAL, case)

    @fuzz
    @given(mutated(deployment_base(), _fields(_spec_schema(DEPLOYMENTS))))
    def fuzz_deployments(case: tuple[dict[str, Any], list[tuple[str, str]]]) -> None:
        send(DEPLOYMENTS, case)

    with running_operator(cluster, [namespace], max_concurrent_builds=4) as op:
        t0 = time.monotonic()
        fuzz_engines()
        fuzz_deployments()
        total = sum(len(v) for v in accepted.values())
        assert total >= 10 and sum(rejected.values()) >= 10, (accepted, rejected)

        def unreported() -> list[str]:
            missing = []
            for plural, items in accepted.items():
                for name, done in items:
                    obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
                    if not _reported(obj):
                        missing.append(f"{plural}/{name} {done}: {obj.get('status')}")
            return missing

        wait_for(
            lambda: not unreported(), timeout=90, interval=1.0, desc="a status for every accepted object"
        )
        for plural, items in accepted.items():
            for name, done in items:
                obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
                for cond in obj["status"]["conditions"]:
                    bad = (cond["type"], cond["status"]) in (("Ready", "False"), ("Degraded", "True"))
                    if bad:
                        assert cond.get("reason") and cond.get("message"), (plural, name, done, cond)
                    if cond["type"] == "Ready" and cond.get("reason") == "InvalidSpec":
                        message = cond["message"]
                        assert message.startswith("spec.") and names_a_mutated_field(message, done), (
                            f"InvalidSpec does not name the path of a mutated field: {message} for {done}"
                        )

        # Builds are real progress, not a loop: every accepted build is short (FROZEN), but the queue
        # (4 at a time) may still be working through them when every object has a status (on a
        # loaded CI machine three engines mid-build were written 5 times in the window). The window
        # starts once no engine is on its way to a result.
        def on_the_way() -> list[str]:
            out = []
            for name, done in accepted.get(ENGINE_PLURAL, []):
                obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, ENGINE_PLURAL, name)
                phase = (obj.get("status") or {}).get("phase")
                if phase in ("Planning", "Queued", "Building"):
                    out.append(f"{name} {phase} ({done})")
            return out

        wait_for(lambda: not on_the_way(), timeout=180, interval=2.0, desc="every accepted build finished")
        deadline = time.monotonic() + QUIET_DEADLINE_SECONDS
        windows: list[list[tuple[str, int]]] = []
        while True:
            writes, changes = _writes_in_window(cluster, namespace, QUIET_WINDOW_SECONDS)
            busiest = writes.most_common(3)
            if not busiest or busiest[0][1] <= MAX_WRITES_IN_WINDOW:
                break
            windows.append(busiest)
            assert time.monotonic() < deadline, (
                f"hot loop: no {QUIET_WINDOW_SECONDS:.0f} s window with at most {MAX_WRITES_IN_WINDOW} "
                f"writes per object in {QUIET_DEADLINE_SECONDS:.0f} s; busiest per window: {windows}; "
                f"what the last window's writes changed: {[changes[k] for k, _ in busiest]}"
            )
        assert op.thread.is_alive() and not op.errors, op.errors
        print(
            f"\n[fuzz] accepted {dict((k, len(v)) for k, v in accepted.items())}, rejected {dict(rejected)}, "
            f"{time.monotonic() - t0:.0f} s, busiest objects in the quiet window: {busiest}"
        )
    unhandled = [r.getMessage() for r in error_records.records]
    assert not unhandled, f"unhandled exceptions in the operator log: {unhandled[:5]}"


def _reported(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    conds = status.get("conditions") or []
    generation = obj["metadata"]["generation"]
    observed = status.get("observedGeneration") or max(
        (c.get("observedGeneration") or 0 for c in conds), default=0
    )
    return bool(conds) and observed == generation and any(c["type"] == "Ready" for c in conds)


def _status_changes(before: Any, after: Any, path: str = "status") -> list[str]:
    """The paths (with the new values, shortened) where ``after`` differs from ``before``."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after)):
            out += _status_changes(before.get(key), after.get(key), f"{path}.{key}")
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            out += _status_changes(b, a, f"{path}[{i}]")
        return out
    return [] if before == after else [f"{path}={str(after)[:160]}"]


def _writes_in_window(
    cluster: LocalCluster, namespace: str, seconds: float
) -> tuple[Counter[str], dict[str, list[list[str]]]]:
    """MODIFIED events per object (both kinds) seen on a watch during ``seconds``, and per object the
    status paths each of them changed (metadata-only writes show as an empty list)."""
    counts: Counter[str] = Counter()
    changes: dict[str, list[list[str]]] = {}
    threads = []
    for plural in (ENGINE_PLURAL, DEPLOYMENTS):

        def run(plural: str = plural) -> None:
            api = client.CustomObjectsApi(cluster.api_client())
            listed = api.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)
            last = {o["metadata"]["name"]: o.get("status") for o in listed["items"]}
            rv = listed["metadata"]["resourceVersion"]
            w = watch.Watch()
            deadline = time.monotonic() + seconds
            for event in w.stream(
                api.list_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                plural,
                resource_version=rv,
                timeout_seconds=max(1, int(seconds)),
            ):
                if event["type"] == "MODIFIED":
                    name = event["object"]["metadata"]["name"]
                    counts[f"{plural}/{name}"] += 1
                    status = event["object"].get("status")
                    changes.setdefault(f"{plural}/{name}", []).append(_status_changes(last.get(name), status))
                    last[name] = status
                if time.monotonic() >= deadline:
                    w.stop()

        threads.append(threading.Thread(target=run))
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 30)
    return counts, changes
