"""Fixtures shared by the integration modules (one copy; a module that needs another ``api`` defines its
own, which pytest prefers to this one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.api import Api
from support.cluster import LocalCluster
from support.manifests import create_token_secret
from support.operator import running_operator


@pytest.fixture
def api(cluster: LocalCluster, namespace: str) -> Api:
    """The API wrapper of the test's namespace, with the Hugging Face token Secret
    :func:`~support.manifests.an_engine` references."""
    a = Api(cluster, namespace)
    create_token_secret(a.core, namespace)
    return a


@pytest.fixture
def operator(cluster: LocalCluster, namespace: str) -> Iterator[None]:
    """The operator, in-process, watching the test's namespace."""
    with running_operator(cluster, [namespace]):
        yield
