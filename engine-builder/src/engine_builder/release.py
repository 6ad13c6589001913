"""Version strings of the libraries an artifact is bound to (TensorRT-LLM, TensorRT): parse and compare.

A leaf module (standard library only): the format table (:mod:`engine_builder.planner.formats`), the
builder contract and the operator's compatibility gate read it.
"""

from __future__ import annotations

import re


def version_tuple(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: ``"1.2.0rc8"`` → ``(1, 2, 0)``,
    ``"0.17.0.post1"`` → ``(0, 17, 0)``, ``"10.14.1.48"`` → ``(10, 14, 1, 48)``. Raises ``ValueError``
    when it does not start with a number."""
    m = re.match(r"\d+(\.\d+)*", version.strip())
    if not m:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(p) for p in m.group(0).split("."))


def same_release(a: str, b: str) -> bool:
    """Whether two version strings name the same release: their numeric releases agree on every
    component both have (``"1.2.0rc8"`` and ``"1.2.0"``: Triton's compatibility matrix writes 1.2.0 for
    the 26.03 image, whose Dockerfile installs 1.2.0rc8; ``"10.14.1.48"`` and ``"10.14.1"``). Strings
    that are not versions are compared as written."""
    try:
        ta, tb = version_tuple(a), version_tuple(b)
    except ValueError:
        return a.strip() == b.strip()
    n = min(len(ta), len(tb))
    return ta[:n] == tb[:n]
