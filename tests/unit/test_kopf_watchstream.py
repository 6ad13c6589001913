"""Issue #20, restart memory: kopf's watch events reach the operator without ``managedFields``,
and its first listings come in pages (handlers/watchstream.py; kopf 1.45.2 holds every listed
object until every index is filled, and lists each resource in one response by default)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kopf._cogs.clients import watching
from support.kopf_settings import configured_settings

from trtllm_operator.handlers import watchstream


def _pod(name: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": name, "managedFields": [{"manager": "kubelet"}]}
    return {"metadata": meta, "spec": {"containers": []}, "status": {"phase": "Running"}}


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """kopf's stream replaced by one that yields a listing (type None), its end marker, and an
    event; the operator's wrapper installed on top of it (undone afterwards)."""
    seen: list[dict[str, Any]] = []

    async def kopfs(**kwargs: Any) -> AsyncIterator[Any]:
        seen.append(kwargs)
        yield {"type": None, "object": _pod("a")}
        yield watching.Bookmark.LISTED
        yield {"type": "MODIFIED", "object": _pod("b")}
        yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}

    monkeypatch.setattr(watchstream, "_kopf_infinite_watch", kopfs)
    monkeypatch.setattr(watching, "infinite_watch", watching.infinite_watch)  # restored afterwards
    watchstream.install()
    watchstream.install()  # idempotent: wrapped once
    yield seen


def test_kopfs_watchers_get_every_object_without_managed_fields(installed: list[dict[str, Any]]) -> None:
    async def collect() -> list[Any]:
        return [e async for e in watching.infinite_watch(settings=None, resource="r", namespace="ns")]

    events = asyncio.run(collect())
    assert installed == [{"settings": None, "resource": "r", "namespace": "ns"}]  # kopf's own arguments
    assert [e if e is watching.Bookmark.LISTED else e["type"] for e in events] == [
        None,
        watching.Bookmark.LISTED,
        "MODIFIED",
        "BOOKMARK",
    ]
    pods = [e["object"] for e in events if isinstance(e, dict) and e["type"] != "BOOKMARK"]
    assert [p["metadata"] for p in pods] == [{"name": n, "namespace": "ns", "uid": n} for n in ("a", "b")]
    assert pods[0]["status"] == {"phase": "Running"} and pods[0]["spec"] == {"containers": []}


def test_the_operator_lists_in_pages() -> None:
    """kopf asks for the whole list in one response unless ``watching.chunk_size`` is set. Failed
    before (None)."""
    settings = configured_settings()
    assert settings.watching.chunk_size == watchstream.LIST_CHUNK


def test_install_refuses_another_kopf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchstream.importlib.metadata, "version", lambda name: "1.46.0")
    with pytest.raises(RuntimeError, match=r"1\.45\.2"):
        watchstream.install()
