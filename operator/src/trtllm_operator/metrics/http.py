"""One bounded HTTP GET for everything the operator pod fetches from addresses users influence.

Pod scrapes (``http://<podIP>:8002/metrics``) and Prometheus queries
(``spec.autoscaling.metrics.prometheusURL``) reach servers that a user of an LLMDeployment controls
or chooses, from inside the operator's process. So every such fetch is bounded:

* **size** — at most ``max_bytes`` of body are read (:class:`ResponseTooLargeError` beyond; a 100 MB page
  costs the operator ``max_bytes``, not 100 MB);
* **time** — ``timeout`` seconds for the whole exchange, not per socket read (a server that drips
  one byte a second is cut off at the deadline: :class:`FetchTimeoutError`);
* **no redirects** — a 3xx answer is an error (:class:`RedirectRefusedError`), so an allowed URL cannot
  bounce the operator to one that is not (the cloud metadata service, the API server);
* **http(s) only**.

All three errors are ``OSError``s, so callers that already treat a failed fetch as "no data" keep
doing so.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPMessage
from typing import IO, Any

#: Default body limit (bytes): a Triton metrics page of a large model repository is a few hundred
#: KiB; a Prometheus instant query for one namespace's pods is smaller still.
DEFAULT_MAX_BYTES = 4 * 2**20
_CHUNK = 64 * 2**10


class ResponseTooLargeError(OSError):
    """The body exceeds the limit."""


class FetchTimeoutError(OSError):
    """The whole exchange took longer than the deadline."""


class RedirectRefusedError(OSError):
    """The server answered with a redirect (never followed)."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(  # noqa: PLR0917 - urllib's signature
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        raise RedirectRefusedError(f"{req.full_url}: HTTP {code} redirect to {newurl!r} refused")


_OPENER = urllib.request.build_opener(_NoRedirect())


def bounded_get(
    url: str, timeout: float, *, max_bytes: int = DEFAULT_MAX_BYTES, headers: dict[str, str] | None = None
) -> bytes:
    """GET ``url`` and return at most ``max_bytes`` of body, within ``timeout`` seconds in total.

    Raises ``OSError``: :class:`ResponseTooLargeError`, :class:`FetchTimeoutError`,
    :class:`RedirectRefusedError`, ``urllib.error.HTTPError`` for other non-2xx answers,
    ``urllib.error.URLError`` when unreachable, and a plain ``OSError`` for a scheme other than
    http/https.
    """
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https"):
        raise OSError(f"{url!r}: only http and https URLs are fetched")
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(url, headers=headers or {})
    resp: Any
    with _OPENER.open(request, timeout=timeout) as resp:
        declared = resp.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise ResponseTooLargeError(f"{url}: {declared} bytes announced, limit {max_bytes}")
        body = bytearray()
        while True:
            if time.monotonic() > deadline:
                raise FetchTimeoutError(f"{url}: no complete answer within {timeout} s")
            chunk = resp.read1(_CHUNK) if hasattr(resp, "read1") else resp.read(_CHUNK)
            if not chunk:
                return bytes(body)
            body += chunk
            if len(body) > max_bytes:
                raise ResponseTooLargeError(f"{url}: more than {max_bytes} bytes")
