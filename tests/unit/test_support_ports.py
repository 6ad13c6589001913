"""tests/support/ports.py: ports for processes that bind them themselves."""

from __future__ import annotations

from support.ports import free_port, free_ports


def test_free_ports_are_distinct_and_avoid_the_ones_given() -> None:
    """The CI run of main 06952e6: the e2e harness took the serving pods' metrics port and then the
    operator's two ports with free_port() one after the other; the operator's metrics server got the
    pods' port and the emulated pods could not bind it (test_builtin_autoscaler_scales_through_the_scale_
    subresource timed out). free_ports holds every socket until all are chosen."""
    for _ in range(50):
        taken = free_port()  # released: the kernel may hand it out again
        ports = free_ports(3, avoid={taken})
        assert len(set(ports)) == 3 and taken not in ports, ports
