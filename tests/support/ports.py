"""TCP ports for tests — the one place tests get them, without a bind-release-reuse race where avoidable.

Best first:

1. **Bind port 0 and read it back** wherever the server is ours and takes port 0 (``http.server``,
   prometheus_client's ``start_http_server``, moto's ``ThreadedMotoServer``): the kernel picks a free
   port at bind time and the test reads it from the bound socket (``server_port``,
   ``get_host_and_port()``). No helper needed, no race.
2. :func:`bound_socket` — hands over a socket bound to a kernel-chosen port. Held (not listening), it
   reserves the port *and* refuses connections (ECONNREFUSED): "an address where nothing listens" for
   as long as the test holds it; no one else can bind it meanwhile.
3. :func:`free_port` + :func:`retry_on_address_in_use` — only where another process (or product code
   that takes a port number, e.g. the operator's metrics port or the emulators' per-pod port) must
   bind the port itself. **Residual race**: between :func:`free_port` closing its socket and the
   other side binding, some unrelated process may take the port; the bind then fails with EADDRINUSE.
   Where the start can be repeated, wrap it in :func:`retry_on_address_in_use` (a fresh port each
   attempt); where it cannot (a port handed to the operator before it starts), the test fails with
   the bind error, never silently.

No port is chosen at import time. A fixed port collides with a second test session or a developer's
demo on the same machine, so tests use none, with one exception: the integration tests that run a
real Prometheus on the chart's PodMonitor (test_hpa_controller.py, test_hpa_lws.py, test_keda_controller.py,
test_keda_lws.py, test_keda_scale_to_zero.py, and test_autoscaling.py's real-Prometheus test) bind Triton's
metrics port 8002 (support.monitoring ``TRITON_METRICS_PORT``) on their emulated serving pods, because
the real Prometheus they run scrapes the container port the operator renders, not one a test picks.
Two things keep that from colliding: the emulators bind each pod's own IP, and each session's pods
have their own 127.N.0.0/16 (hack/localcluster ``pod_cidr_for``); and
``support.monitoring.require_triton_metrics_port_free()`` fails those tests at once when something
listens on 127.0.0.1:8002 (a wildcard listener would answer the scrapes). The guard
tests/unit/test_test_hygiene.py::test_no_fixed_port_is_bound finds a fixed port given as a literal or
a named constant, and allows only these uses (``FIXED_PORTS_ALLOWED``).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Collection
from typing import TypeVar

T = TypeVar("T")

#: How the address-in-use failure reads in a child's log (Go's net package, Python's OSError text).
ADDRESS_IN_USE_TEXT = "address already in use"


def bound_socket(host: str = "127.0.0.1") -> socket.socket:
    """A TCP socket bound to ``(host, 0)``: the port is ``sock.getsockname()[1]``; the caller closes it.

    Not listening: while it is held, connections to the port are refused and nobody else can bind it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
    except BaseException:
        sock.close()
        raise
    return sock


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that was free a moment ago, for a process that must bind it itself.

    Residual race (see the module docstring): the port is released on return. Prefer binding port 0
    in-process, or :func:`bound_socket`; wrap restartable starts in :func:`retry_on_address_in_use`.
    """
    with bound_socket(host) as sock:
        return int(sock.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1", avoid: Collection[int] = ()) -> list[int]:
    """``count`` distinct ports on ``host``, none of them in ``avoid``, free a moment ago: every socket is
    held until all are chosen, so the kernel cannot hand the same port out twice, as two
    :func:`free_port` calls in a row can. ``avoid``: ports chosen earlier and not bound yet (the e2e
    serving pods' metrics port beside the operator's own two: the CI run of main 06952e6 had the
    operator's metrics server on the pods' port, and the emulated pods could not bind it). The same
    residual race as :func:`free_port` once they are released."""
    held: list[socket.socket] = []
    chosen: list[int] = []
    try:
        while len(chosen) < count:
            sock = bound_socket(host)
            held.append(sock)  # a port in ``avoid`` stays held too, so the next bind gets another
            port = int(sock.getsockname()[1])
            if port not in avoid:
                chosen.append(port)
    finally:
        for sock in held:
            sock.close()
    return chosen


def address_in_use_error(detail: str) -> OSError:
    """The OSError to raise when a child process reports that its port was taken (``detail``: its log)."""
    return OSError(errno.EADDRINUSE, f"{ADDRESS_IN_USE_TEXT}: {detail}")


def retry_on_address_in_use(start: Callable[[int], T], host: str = "127.0.0.1", attempts: int = 5) -> T:
    """``start(port)`` with a fresh :func:`free_port`; if it raises EADDRINUSE (the residual race lost),
    try again with another port, up to ``attempts`` times; any other error propagates at once."""
    for attempt in range(1, attempts + 1):
        try:
            return start(free_port(host))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or attempt == attempts:
                raise
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
