"""Fixtures shared by the integration modules (one copy; a module that needs another ``api`` defines its
own, which pytest prefers to this one, or marks what it needs: ``cached_engine``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.api import Api
from support.cluster import LocalCluster
from support.manifests import create_token_secret
from support.operator import running_operator


@pytest.fixture
def api(request: pytest.FixtureRequest, cluster: LocalCluster, namespace: str) -> Iterator[Api]:
    """The API wrapper of the test's namespace, with the Hugging Face token Secret
    :func:`~support.manifests.an_engine` references.

    Marked ``@pytest.mark.cached_engine(name)`` (a test, or a module's ``pytestmark``): instead, with
    LLMEngine ``name`` created from an artifact recorded in the engine cache
    (:meth:`~support.api.Api.with_cached_engine`: no build, no token Secret), its PV deleted after the test.
    """
    a = Api(cluster, namespace)
    marker = request.node.get_closest_marker("cached_engine")
    if marker is None:
        create_token_secret(a.core, namespace)
        yield a
    else:
        with a.with_cached_engine(*marker.args) as cached:
            yield cached


@pytest.fixture
def operator(cluster: LocalCluster, namespace: str) -> Iterator[None]:
    """The operator, in-process, watching the test's namespace."""
    with running_operator(cluster, [namespace]):
        yield
