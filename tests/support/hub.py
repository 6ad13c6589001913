"""A local Hub-like file server: the Hugging Face Hub's resolve API, for tests (no Hub here).

It serves ``GET``/``HEAD /{repo_id}/resolve/{revision}/{filename}`` the way huggingface_hub 2.4.0 (the
version pinned in engine-builder/pyproject.toml) expects it to:

* success: ``X-Repo-Commit`` (the commit the revision resolves to) and ``ETag`` (quoted) and
  ``Content-Length`` — ``file_download._get_metadata_or_catch_error`` raises ``FileMetadataError``
  without the first two, and ``get_hf_file_metadata`` reads the size from ``Content-Length``;
* errors as ``utils/_http.py`` ``hf_raise_for_status`` classifies them, through ``X-Error-Code`` /
  ``X-Error-Message``: a gated repository without a token → 401 ``GatedRepo``; a wrong token → 401
  "Invalid credentials in Authorization header"; an unknown repository → 404 ``RepoNotFound``; an
  unknown revision → 404 ``RevisionNotFound``; a missing file → 404 ``EntryNotFound`` (with
  ``X-Repo-Commit``, which huggingface_hub caches as "does not exist at this commit").

It also serves ``GET /api/models/{repo_id}`` and ``/api/models/{repo_id}/revision/{revision}``, the
route of ``HfApi.model_info`` (hf_api.py: ``{endpoint}/api/models/{repo_id}/revision/{revision}``,
``params["blobs"] = True`` with ``files_metadata=True``), as JSON that ``ModelInfo(**data)`` reads:
``id``, ``sha`` (the commit), ``gated`` and ``siblings`` (``rfilename``, and ``size``/``blobId`` only
with ``blobs``). A gated repository's metadata is public (its files are not): without a token the
listing is served, with a wrong one it is a 401 like every route. The builder's fetch
(engine_builder/fetch.py) lists with ``model_info`` and downloads with ``hf_hub_download``.

The token is checked as huggingface_hub sends it (``build_hf_headers``: ``authorization: Bearer
<token>``). A stand-in for the real Hub: it serves files, nothing else (no Xet, no redirects to a CDN,
no other API route). Point ``HF_ENDPOINT`` (or huggingface_hub's ``endpoint=``) at :attr:`LocalHub.url`.
Every request is recorded in :attr:`LocalHub.requests` (method, path, whether a token was sent), except
one: huggingface_hub 2.4.0 builds its user agent with ``utils/_detect_agent.py`` ``detect_agent()``, which
fetches ``GET {endpoint}/api/agent-harnesses`` once per process (then caches it in
``$HF_HOME/.agent_harnesses.json`` for 24 hours). That request belongs to the library, not to the
builder's fetch, and comes first only in the first test of a process that talks to a hub; it is served
as an empty registry (what ``_EMPTY_REGISTRY`` holds) and counted in :attr:`LocalHub.registry_requests`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class HubRepo:
    """One repository: its files, the commit ``main`` resolves to, and the token a gated one needs."""

    files: Mapping[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    token: str | None = None
    #: Sizes the listing reports instead of the files' own (a listing that disagrees with what is
    #: then served: a repository changed between the two, or a truncated transfer).
    listed_sizes: Mapping[str, int] = field(default_factory=dict)


@dataclass
class LocalHub:
    """The server; use :func:`local_hub` to run one."""

    repos: Mapping[str, HubRepo]
    url: str = ""
    requests: list[tuple[str, str, bool]] = field(default_factory=list)
    registry_requests: int = 0

    def respond(self, method: str, path: str, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one request (pure; the handler only does the I/O)."""
        route, _, query = path.partition("?")
        if route == "/api/agent-harnesses":
            self.registry_requests += 1
            body = json.dumps({"standardEnvVars": [], "harnesses": {}}).encode()
            return 200, {"Content-Type": "application/json", "Content-Length": str(len(body))}, body
        self.requests.append((method, path, authorization is not None))
        if route.startswith("/api/models/"):
            return self._model_info(route.removeprefix("/api/models/").split("/"), query, authorization)
        parts = route.lstrip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return 404, {"X-Error-Code": "RepoNotFound"}, b"not a resolve URL"
        repo_id, revision, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
        repo = self.repos.get(repo_id)
        if repo is None:
            return 404, {"X-Error-Code": "RepoNotFound"}, b"Repository not found"
        if repo.token is not None:
            if authorization is None:
                return 401, {"X-Error-Code": "GatedRepo"}, b"Access to this gated repo is restricted"
            if authorization != f"Bearer {repo.token}":
                return 401, {"X-Error-Message": "Invalid credentials in Authorization header"}, b""
        if revision not in ("main", repo.commit):
            return 404, {"X-Error-Code": "RevisionNotFound"}, b"Revision not found"
        content = repo.files.get(filename)
        if content is None:
            return 404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": repo.commit}, b"Entry not found"
        headers = {
            "X-Repo-Commit": repo.commit,
            "ETag": f'"{hashlib.sha256(content).hexdigest()}"',
            "Content-Length": str(len(content)),
            "Content-Type": "application/octet-stream",
        }
        return 200, headers, content

    def _model_info(
        self, parts: list[str], query: str, authorization: str | None
    ) -> tuple[int, dict[str, str], bytes]:
        if len(parts) == 2:
            revision = "main"
        elif len(parts) == 4 and parts[2] == "revision":
            revision = urllib.parse.unquote(parts[3])
        else:
            return 404, {"X-Error-Code": "RepoNotFound"}, b"not a model info URL"
        repo_id = "/".join(parts[:2])
        repo = self.repos.get(repo_id)
        if repo is None:
            return 404, {"X-Error-Code": "RepoNotFound"}, b"Repository not found"
        if repo.token is not None and authorization not in (None, f"Bearer {repo.token}"):
            return 401, {"X-Error-Message": "Invalid credentials in Authorization header"}, b""
        if revision not in ("main", repo.commit):
            return 404, {"X-Error-Code": "RevisionNotFound"}, b"Revision not found"
        blobs = urllib.parse.parse_qs(query).get("blobs", [""])[0].lower() == "true"
        siblings = [
            {"rfilename": name, "size": repo.listed_sizes.get(name, len(data)), "blobId": _git_blob_id(data)}
            if blobs
            else {"rfilename": name}
            for name, data in sorted(repo.files.items())
        ]
        info = {
            "id": repo_id,
            "sha": repo.commit,
            "private": False,
            "gated": "manual" if repo.token is not None else False,
            "siblings": siblings,
        }
        body = json.dumps(info).encode()
        return 200, {"Content-Type": "application/json", "Content-Length": str(len(body))}, body


def _git_blob_id(data: bytes) -> str:
    """The file's git object id (what the Hub reports as ``blobId``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@contextmanager
def local_hub(repos: Mapping[str, HubRepo]) -> Iterator[LocalHub]:
    """Run a :class:`LocalHub` on 127.0.0.1 (a free port) until the block exits."""
    hub = LocalHub(repos)

    class Handler(BaseHTTPRequestHandler):
        def _serve(self, body: bool) -> None:
            status, headers, content = hub.respond(self.command, self.path, self.headers.get("authorization"))
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            if body:
                self.wfile.write(content)

        def do_GET(self) -> None:
            self._serve(body=True)

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="local-hub", daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
