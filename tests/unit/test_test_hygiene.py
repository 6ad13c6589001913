"""Guards that keep the test suite's hygiene (issue 23, items 4 and 5), read from the tests' own source.

- No test module imports another test module (``from tests.integration.test_x import ...``,
  ``from test_x import ...``), and no benchmark imports a test module: shared code lives in
  tests/support (or a conftest).
- One port helper: no module but tests/support/ports.py defines ``free_port``; no test binds a fixed
  port (a literal like Triton's 8002, or a named int constant like ``TRITON_METRICS_PORT``, given to a
  bind, a server or a port setting — a literal as an *expected value*, e.g. the 8002 of a rendered
  container port, is fine), but for the uses ``FIXED_PORTS_ALLOWED`` names with their reason; no port
  is chosen at import time.
- One API wrapper: a class named ``*Api`` in tests/ is tests/support/api.py's ``Api`` or a subclass of it.
- A pre-bound artifact PV (cluster scoped, so a test namespace's deletion leaves it) is made only through
  ``Api.artifact_pvc()``, which deletes it: no test calls ``prebound_artifact_pvc`` itself (a fresh-user
  trial found test_faults.py's scale test leaving its PV behind).
- One helper publishes a process on this host as a Service (tests/support/host_service.py): no other
  module writes an ``EndpointSlice`` manifest (tests/support/lws.py and monitoring.py had a copy each).
- One helper stops a process (tests/support/process.py ``stop_process``): no other module kills a process
  after its wait timed out (``except subprocess.TimeoutExpired: proc.kill()``; lws.py, monitoring.py,
  prometheus.py, outage.py and e2e_harness.py had a copy each).
- No assert on what a wait returned unless compared with a value: ``wait_for`` returns something truthy
  or raises, so ``assert wait_for(...)`` can never fail.
- No upper bound on elapsed wall time (issue 23 item 5: timing bounds live in benchmarks/, not tests): no
  assert that a clock difference (``time.monotonic()``, ``time.time()``, ``time.perf_counter()``, or a
  helper in tests/ that returns one) is ``<``/``<=`` something. A lower bound (``>=``: not before a
  window) is a property a slow machine cannot break; a deadline belongs in a wait's ``timeout``.

``wait_for`` letting a failed assertion fail at once (not retried into a timeout) is proven by
tests/unit/test_support_wait.py::test_a_failed_assertion_fails_at_once_not_as_a_timeout.
Each guard is also run over a snippet that breaks it, so a guard that can no longer fail fails here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
PORT_HELPER = TESTS / "support" / "ports.py"
API_WRAPPER = TESTS / "support" / "api.py"
#: The names tests/support/api.py's Api goes by as a base class (``from support.api import Api
#: as SharedApi``), and the name itself.
API_BASES = {"SharedApi", "Api"}
#: Calls whose first argument is an address tuple ``(host, port)`` that gets bound.
BINDERS = {"bind", "HTTPServer", "ThreadingHTTPServer", "TCPServer", "ThreadingTCPServer", "create_server"}
#: Calls whose first positional argument is a port they bind.
PORT_FIRST = {"start_http_server", "start_wsgi_server"}

#: Calls (product and tests/support) that bind the port given as a ``*port`` keyword.
KEYWORD_BINDERS = {
    "Fleet",
    "ControlServer",
    "running_operator",
    "operator_process",
    "ThreadedMotoServer",
    *PORT_FIRST,
}

Check = Callable[[ast.Module], list[str]]


def sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _fixed_port(node: ast.expr | None, constants: Mapping[str, int] | None = None) -> str | None:
    """The fixed port ``node`` names, as the hit shows it: an int literal (``8002``; 0 means "the kernel
    picks": not fixed) or an upper-case name that is an int constant in ``constants``
    (``TRITON_METRICS_PORT (= 8002)``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0:
        return str(node.value)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    if constants and name.isupper() and name in constants:
        return f"{name} (= {constants[name]})"
    return None


def int_constants(trees: list[ast.Module]) -> dict[str, int]:
    """Module-level upper-case names bound to a positive int (``TRITON_METRICS_PORT = 8002``), or to
    such a name (``METRICS_PORT = DEFAULT_PORT``), in ``trees``."""
    bound: dict[str, ast.expr] = {}
    for tree in trees:
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                target, value = stmt.target, stmt.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id.isupper():
                bound[target.id] = value
    constants: dict[str, int] = {}
    for _ in range(3):  # aliases of aliases
        for name, value in bound.items():
            if isinstance(value, ast.Constant) and type(value.value) is int and value.value > 0:
                constants[name] = value.value
            elif isinstance(value, ast.Name) and value.id in constants:
                constants[name] = constants[value.id]
    return constants


def imports_of_test_modules(tree: ast.Module) -> list[str]:
    """Imports of a test module (``test_*``) or a conftest."""

    def is_test_module(dotted: str) -> bool:
        return any(part.startswith("test_") or part == "conftest" for part in dotted.split("."))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if any(is_test_module(f"{module}.{a.name}".strip(".")) for a in node.names):
                found.append(f"line {node.lineno}: from {'.' * node.level}{module} import ...")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if is_test_module(a.name)]
    return found


def own_port_helpers(tree: ast.Module) -> list[str]:
    return [
        f"line {node.lineno}: def {node.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "free_port"
    ]


def fixed_port_binds(tree: ast.Module, constants: Mapping[str, int] | None = None) -> list[str]:
    """Fixed ports (int literals, or names of int ``constants``) given to something that binds or
    listens on them."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        if (
            name in BINDERS
            and node.args
            and isinstance(node.args[0], ast.Tuple)
            and len(node.args[0].elts) >= 2
        ):
            port = _fixed_port(node.args[0].elts[1], constants)
            if port is not None:
                found.append(f"line {node.lineno}: {name}((…, {port}))")
        if name in PORT_FIRST and node.args and (port := _fixed_port(node.args[0], constants)) is not None:
            found.append(f"line {node.lineno}: {name}({port})")
        if name in KEYWORD_BINDERS:
            for kw in node.keywords:
                if (
                    kw.arg
                    and kw.arg.endswith("port")
                    and (port := _fixed_port(kw.value, constants)) is not None
                ):
                    found.append(f"line {node.lineno}: {name}({kw.arg}={port})")
        if name == "Fleet" and not any(kw.arg == "port" for kw in node.keywords):
            found.append(f"line {node.lineno}: Fleet() without port= (it binds Triton's 8002 by default)")
        if name == "setattr" and len(node.args) == 3:
            attr = node.args[1]
            port = _fixed_port(node.args[2], constants)
            if isinstance(attr, ast.Constant) and "PORT" in str(attr.value).upper() and port is not None:
                found.append(f"line {node.lineno}: setattr(…, {attr.value!r}, {port})")
    return found


def import_time_ports(tree: ast.Module) -> list[str]:
    """A port helper called at module level (outside any function or class body)."""
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and _name(node.func) in {"free_port", "bound_socket"}:
                found.append(f"line {node.lineno}: {_name(node.func)}() at import time")
    return found


WAITS = {"wait_for", "wait_phase", "wait_settled", "settled_events"}


def tautological_waits(tree: ast.Module) -> list[str]:
    """``assert`` on what a wait returned, bare (``assert wait_for(...)``, ``assert x`` or ``assert x is
    not None`` for ``x = wait_for(...)``): a wait returns something truthy or raises, so the assert can
    never fail. Comparing what it returned with a value (``== "Failed"``) is a real check."""

    def is_wait(node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and _name(node.func) in WAITS

    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        waited = {
            t.id
            for node in ast.walk(fn)
            if isinstance(node, ast.Assign) and is_wait(node.value)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(fn):
            if not isinstance(node, ast.Assert):
                continue
            test = node.test
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot):
                right = test.comparators[0]
                if isinstance(right, ast.Constant) and right.value is None:
                    test = test.left
            operands = (
                test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
            )
            for operand in operands:
                if is_wait(operand) or (isinstance(operand, ast.Name) and operand.id in waited):
                    found.append(f"line {node.lineno}: assert {ast.unparse(operand)}")
    return sorted(set(found))


#: Clock calls whose result is a point in wall time (``time.time``: the attribute or a bare import).
CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}


def clock_helpers(trees: list[ast.Module]) -> set[str]:
    """Functions (in ``trees``) that return a clock reading, e.g. tests/support/api.py's ``Api.set_load``
    (``return time.monotonic()``): what they return is a point in wall time too."""
    return {
        fn.name
        for tree in trees
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(
            isinstance(r, ast.Return)
            and isinstance(r.value, ast.Call)
            and _name(r.value.func) in CLOCKS
            and not r.value.args
            for r in ast.walk(fn)
        )
    }


def _upper_bounds_in(nodes: list[ast.AST], helpers: frozenset[str]) -> list[str]:
    """:func:`wall_clock_upper_bounds` over the nodes of one scope."""
    readings: set[str] = set()  # names assigned a clock reading
    elapsed: set[str] = set()  # names assigned a difference with one

    def is_reading(node: ast.expr) -> bool:
        if isinstance(node, ast.Call):
            name = _name(node.func)
            return (name in CLOCKS and not node.args) or name in helpers
        return isinstance(node, ast.Name) and node.id in readings

    def is_elapsed(node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in elapsed
        return (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Sub)
            and (is_reading(node.left) or is_reading(node.right))
        )

    for node in nodes:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if is_reading(node.value):
                readings |= names
            elif is_elapsed(node.value):
                elapsed |= names
    found = []
    for node in nodes:
        if not isinstance(node, ast.Assert):
            continue
        for compare in (c for c in ast.walk(node.test) if isinstance(c, ast.Compare)):
            sides = [compare.left, *compare.comparators]
            for op, small, large in zip(compare.ops, sides, sides[1:], strict=False):
                if (isinstance(op, ast.Lt | ast.LtE) and is_elapsed(small)) or (
                    isinstance(op, ast.Gt | ast.GtE) and is_elapsed(large)
                ):
                    found.append(f"line {node.lineno}: assert {ast.unparse(compare)}")
    return found


def wall_clock_upper_bounds(tree: ast.Module, helpers: frozenset[str] = frozenset()) -> list[str]:
    """Asserts that bound an elapsed wall time from above: a difference involving a clock reading (a
    clock call, a call of one of ``helpers``, or a name assigned from either in the same function), or a
    name assigned from such a difference, on the small side of ``<``/``<=`` (the large of ``>``/``>=``)."""
    defs = ast.FunctionDef | ast.AsyncFunctionDef
    top = [s for s in tree.body if not isinstance(s, defs | ast.ClassDef)]
    scopes = [top, *([fn] for fn in ast.walk(tree) if isinstance(fn, defs))]
    found = [
        hit
        for scope in scopes
        for hit in _upper_bounds_in([n for stmt in scope for n in ast.walk(stmt)], helpers)
    ]
    return sorted(set(found))


def own_api_wrappers(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.endswith("Api"):
            bases = {_name(b) for b in node.bases}
            if not bases & API_BASES:
                found.append(f"line {node.lineno}: class {node.name}({', '.join(sorted(bases))})")
    return found


def leaked_persistent_volumes(tree: ast.Module) -> list[str]:
    """Calls of ``prebound_artifact_pvc``: its PV outlives the namespace unless deleted."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _name(node.func) == "prebound_artifact_pvc"
    ]


HOST_SERVICE = TESTS / "support" / "host_service.py"


def own_endpoint_slices(tree: ast.Module) -> list[str]:
    """Dict literals with ``"kind": "EndpointSlice"``: a Service endpoint written by hand."""
    return [
        f"line {node.lineno}: an EndpointSlice manifest"
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        and any(
            isinstance(k, ast.Constant)
            and k.value == "kind"
            and isinstance(v, ast.Constant)
            and v.value == "EndpointSlice"
            for k, v in zip(node.keys, node.values, strict=True)
        )
    ]


PROCESS_HELPER = TESTS / "support" / "process.py"


def own_process_stops(tree: ast.Module) -> list[str]:
    """``except ...TimeoutExpired:`` handlers that call ``.kill()``: terminate, wait, kill written again."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ExceptHandler) or node.type is None:
            continue
        caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        if not any(_name(t) == "TimeoutExpired" for t in caught):
            continue
        if any(isinstance(n, ast.Call) and _name(n.func) == "kill" for s in node.body for n in ast.walk(s)):
            found.append(f"line {node.lineno}: kill() after a TimeoutExpired")
    return found


def _violations(check: Check, skip: Path | None = None) -> dict[str, list[str]]:
    out = {}
    for path in sources():
        if path == skip:
            continue
        hits = check(ast.parse(path.read_text(), filename=str(path)))
        if hits:
            out[str(path.relative_to(TESTS))] = hits
    return out


def test_no_imports_of_test_modules_another() -> None:
    assert _violations(imports_of_test_modules) == {}, "move what is shared to tests/support or a conftest"


def test_no_benchmark_imports_a_test_module() -> None:
    """benchmarks/ too: a benchmark that imports a test module breaks when the test changes (and runs its
    module-level code: importorskip, fixtures); benchmarks/triton_cpu.py imported test_triton_fidelity."""
    found = {
        path.name: hits
        for path in sorted((TESTS.parent / "benchmarks").rglob("*.py"))
        if (hits := imports_of_test_modules(ast.parse(path.read_text(), filename=str(path))))
    }
    assert found == {}, "move what is shared to tests/support (benchmarks put tests/ on sys.path)"


def test_free_port_lives_only_in_the_port_helper() -> None:
    assert _violations(own_port_helpers, skip=PORT_HELPER) == {}, "use support.ports"


#: Fixed ports bound on purpose, by module, each through a named constant. The emulated serving pods
#: of the real-HPA and real-KEDA tests bind Triton's metrics port, support.monitoring's
#: ``TRITON_METRICS_PORT`` (8002), because the real Prometheus they run scrapes the container port the
#: operator renders (render/serving.py ``METRICS_PORT``), not one a test picks. What keeps it safe:
#: each session's pods have their own IPs (127.N.0.0/16, hack/localcluster ``pod_cidr_for``), and
#: ``require_triton_metrics_port_free()`` fails the test at once when something listens on
#: 127.0.0.1:8002 (a wildcard listener would answer the scrapes). See tests/support/ports.py.
FIXED_PORTS_ALLOWED = {
    "integration/test_hpa_controller.py": "TRITON_METRICS_PORT",
    "integration/test_keda_controller.py": "TRITON_METRICS_PORT",
    "integration/test_keda_lws.py": "TRITON_METRICS_PORT",
    "integration/test_hpa_lws.py": "TRITON_METRICS_PORT",
    # the real-Prometheus test and the scale-to-zero test scrape what the chart's PodMonitor selects
    # (the rendered container port) since stop 40, as the three above
    "integration/test_autoscaling.py": "TRITON_METRICS_PORT",
    "integration/test_keda_scale_to_zero.py": "TRITON_METRICS_PORT",
}


def port_constants() -> dict[str, int]:
    """Int constants of tests/ and of the operator's source (``METRICS_PORT = 8002``)."""
    product = sorted((TESTS.parent / "operator" / "src").rglob("*.py"))
    return int_constants([ast.parse(p.read_text(), filename=str(p)) for p in [*sources(), *product]])


def test_no_fixed_port_is_bound() -> None:
    constants = port_constants()
    found = _violations(lambda tree: fixed_port_binds(tree, constants))
    for path, name in FIXED_PORTS_ALLOWED.items():
        hits = found.pop(path, [])
        assert hits, f"{path} binds {name} no more: drop it from FIXED_PORTS_ALLOWED"
        assert all(f"={name} (= " in hit for hit in hits), (path, hits)
    assert found == {}, "bind port 0 and read it back, or use support.ports"


def test_no_port_is_chosen_at_import_time() -> None:
    assert _violations(import_time_ports) == {}, "choose ports in a fixture or the test"


def test_no_assert_on_a_wait_that_is_always_truthy() -> None:
    assert _violations(tautological_waits, skip=Path(__file__)) == {}, (
        "a wait fails on its own: drop the assert, or compare what it returned with a value"
    )


def test_artifact_pvs_are_made_only_by_the_helper_that_deletes_them() -> None:
    assert _violations(leaked_persistent_volumes, skip=API_WRAPPER) == {}, (
        "use `with api.artifact_pvc():` (tests/support/api.py), which deletes the PV"
    )


def test_one_helper_publishes_a_host_process_as_a_service() -> None:
    assert _violations(own_endpoint_slices, skip=HOST_SERVICE) == {}, (
        "use support.host_service.host_service(name, namespace, port=…, host=…, host_port=…)"
    )


def test_one_helper_stops_a_process() -> None:
    assert _violations(own_process_stops, skip=PROCESS_HELPER) == {}, (
        "use support.process.stop_process(proc, grace, kill_wait) (or Process.stop)"
    )


def test_no_upper_bound_on_elapsed_wall_time() -> None:
    helpers = frozenset(clock_helpers([ast.parse(p.read_text(), filename=str(p)) for p in sources()]))
    assert _violations(lambda tree: wall_clock_upper_bounds(tree, helpers)) == {}, (
        "a busy machine breaks a wall-time budget: move the bound to benchmarks/, or check the property "
        "without a clock (a count, an order, the operator's own record)"
    )


def test_one_api_wrapper() -> None:
    assert _violations(own_api_wrappers, skip=API_WRAPPER) == {}, (
        "use tests/support/api.py's Api (a module adds its own methods in a subclass)"
    )


@pytest.mark.parametrize(
    ("check", "source"),
    [
        (imports_of_test_modules, "from tests.integration.test_engine import running_build\n"),
        (imports_of_test_modules, "from test_engine import running_build\n"),
        (imports_of_test_modules, "from .test_engine import running_build\n"),
        (imports_of_test_modules, "from integration import test_engine\n"),
        (imports_of_test_modules, "import tests.integration.test_engine\n"),
        (own_port_helpers, "def free_port() -> int:\n    return 1\n"),
        (fixed_port_binds, "sock.bind(('127.0.0.1', 8002))\n"),
        (fixed_port_binds, "ThreadingHTTPServer(('127.0.0.1', 8002), Handler)\n"),
        (fixed_port_binds, "start_http_server(8002)\n"),
        (fixed_port_binds, "Fleet(port=8002)\n"),
        (fixed_port_binds, "Fleet(control=Control())\n"),
        (fixed_port_binds, "running_operator(cluster, [ns], metrics_port=9100)\n"),
        (fixed_port_binds, "monkeypatch.setattr(autoscaler, 'METRICS_PORT', 8002)\n"),
        (
            lambda tree: fixed_port_binds(tree, int_constants([tree])),
            "TRITON_METRICS_PORT = 8002\nFleet(PROFILE, port=TRITON_METRICS_PORT)\n",
        ),
        (
            lambda tree: fixed_port_binds(tree, {"METRICS_PORT": 8002}),
            "sock.bind(('127.0.0.1', serving.METRICS_PORT))\n",
        ),
        (import_time_ports, "PORT = free_port()\n"),
        (own_api_wrappers, "class EngineApi:\n    pass\n"),
        (own_endpoint_slices, "docs = [{'apiVersion': 'discovery.k8s.io/v1', 'kind': 'EndpointSlice'}]\n"),
        (leaked_persistent_volumes, "def t(api):\n    prebound_artifact_pvc(api.core, api.ns)\n"),
        (
            own_process_stops,
            "try:\n    p.wait(15)\nexcept subprocess.TimeoutExpired:\n    p.kill()\n    p.wait(5)\n",
        ),
        (tautological_waits, "def t():\n    assert wait_for(lambda: x() == 2, timeout=10)\n"),
        (tautological_waits, "def t():\n    cond = wait_for(ready)\n    assert cond\n"),
        (tautological_waits, "def t():\n    e = api.wait_phase('e', 'Ready')\n    assert e is not None\n"),
        (tautological_waits, "def t():\n    cond = wait_for(ready)\n    assert cond and ok\n"),
        # tests/unit/test_tritoncpu_pods.py and tests/integration/test_autoscaling.py before issue 23's fix
        (
            wall_clock_upper_bounds,
            "def t():\n    t0 = time.monotonic()\n    f()\n    assert time.monotonic() - t0 < 5 and ok\n",
        ),
        (
            lambda tree: wall_clock_upper_bounds(tree, frozenset({"set_load", "first_time"})),
            "def t():\n    t_up = api.set_load(fleet)\n    t_scaled = first_time(api)\n"
            "    assert w - 1.5 <= t_scaled - t_up <= w + 10\n",
        ),
        (
            wall_clock_upper_bounds,
            "def t():\n    start = perf_counter()\n    f()\n"
            "    took = perf_counter() - start\n    assert 1 > took\n",
        ),
        (wall_clock_upper_bounds, "def t():\n    t0 = time.time()\n    assert time.time() - t0 <= 30\n"),
    ],
)
def test_each_guard_catches_what_it_names(check: Check, source: str) -> None:
    assert check(ast.parse(source))


@pytest.mark.parametrize(
    ("check", "source"),
    [
        (imports_of_test_modules, "from support.api import Api\nfrom e2e_harness import Installed\n"),
        (fixed_port_binds, "sock.bind(('127.0.0.1', 0))\nFleet(port=0)\nFleet(port=port)\n"),
        (  # a lower-case name is a variable (a port read back or from free_port), not a constant
            lambda tree: fixed_port_binds(tree, {"port": 8002}),
            "Fleet(port=port)\n",
        ),
        (fixed_port_binds, "assert metrics_port(api) == 8002\n"),  # an expected value, not a bind
        (fixed_port_binds, "scrape_pods(pods, port=8002, fetch=fake)\n"),  # a URL built, nothing bound
        (import_time_ports, "def f() -> int:\n    return free_port()\n"),
        (own_api_wrappers, "class Api(SharedApi):\n    pass\n"),
        (
            own_process_stops,
            "try:\n    p.wait(15)\nexcept subprocess.TimeoutExpired as exc:\n    raise X from exc\n",
        ),
        (tautological_waits, "def t():\n    assert wait_for(finished) == 'Failed'\n"),
        (tautological_waits, "def t():\n    cond = wait_for(ready)\n    assert cond['reason'] == 'X'\n"),
        # a lower bound (not before the window), and a difference of values that are no clock readings
        (
            wall_clock_upper_bounds,
            "def t():\n    t0 = time.monotonic()\n    f()\n    assert time.monotonic() - t0 >= 3\n",
        ),
        (wall_clock_upper_bounds, "def t():\n    assert after - before <= 1\n"),
    ],
)
def test_each_guard_passes_what_it_allows(check: Check, source: str) -> None:
    assert not check(ast.parse(source))
