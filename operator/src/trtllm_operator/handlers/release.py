"""The operator release that last reconciled an object: ``status.reconciledBy``.

kopf resumes every LLMEngine and LLMDeployment when the operator starts. A settled object resumed
by the *same* release needs nothing: the reconcile would find what it wrote (issue 20, 1,000 +
1,000 objects: 138.8 s to resume them one by one). An object last reconciled by another release
must be reconciled at once: that release may derive engine keys or render children differently
(tests/e2e/test_upgrade.py). The status cannot tell the two apart by itself, so each controller's
status write carries :func:`release_stamp` in ``status.reconciledBy``, and a resume skips an object
only when the caches show it settled **and** stamped by this release (:func:`stamped`); a missing
stamp (an object of an earlier release) or another one reconciles it.

The stamp is the package version plus a digest of what decides a reconcile's outcome: the source
of the operator and builder packages (the project bumps no version between commits of main, so
the version alone would not tell two releases apart) and the settings that reach the rendered
objects or the decisions (not those of the process's own plumbing: ports, logging, timers — a
restart with another metrics port must not reconcile everything). It is written with the status
write a reconcile makes anyway, and on its own once per object after an upgrade or a settings
change (the reconcile finds the stamp differs: one status PATCH, then nothing); never in steady
state.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import engine_builder
import trtllm_operator
from trtllm_operator.settings import Settings, current

#: Settings of the process's own plumbing: they change nothing a reconcile decides or renders.
PLUMBING_SETTINGS = frozenset(
    {
        "listen_address",
        "liveness_port",
        "metrics_port",
        "metrics_auth",
        "metrics_secure",
        "metrics_cert_dir",
        "log_format",
        "log_level",
        "watch_server_timeout_seconds",
        "error_backoff_seconds",
        "resync_seconds",
        "build_progress_seconds",
    }
)


#: Held while :func:`code_digest` reads the sources: kopf's handler threads all ask for the stamp at
#: once when the operator starts, and ``functools.cache`` alone let each of them read every source
#: file (20 % of a restart's samples at 300 + 300, py-spy; benchmarks/scale.py, issue #20).
_DIGEST_LOCK = threading.Lock()


def code_digest() -> str:
    """sha256 over the Python sources of the operator and builder packages as installed (relative
    path and content of every ``*.py``, in path order); read once per process, by one thread."""
    with _DIGEST_LOCK:
        return _code_digest()


@functools.cache
def _code_digest() -> str:
    digest = hashlib.sha256()
    for package in (trtllm_operator, engine_builder):
        root = Path(next(iter(package.__path__)))
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{package.__name__}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def release_stamp(settings: Settings | None = None) -> str:
    """``<version>+<12 hex>``: the package version, and a digest of the sources and the deciding
    settings (``settings``: default the process's)."""
    settings = settings or current()
    deciding = {k: v for k, v in settings.model_dump(mode="json").items() if k not in PLUMBING_SETTINGS}
    digest = hashlib.sha256(code_digest().encode())
    digest.update(json.dumps(deciding, sort_keys=True).encode())
    return f"{trtllm_operator.__version__}+{digest.hexdigest()[:12]}"


def stamp_field() -> dict[str, str]:
    """The status field a reconcile's status write carries (merged into its status patch)."""
    return {"reconciledBy": release_stamp()}


def stamped(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj``'s status says this release (and these settings) last reconciled it."""
    return unstamped_reason(obj) is None


def unstamped_reason(obj: Mapping[str, Any]) -> str | None:
    """Why ``obj`` is not :func:`stamped` (no ``status.reconciledBy``, or another release's), as a
    short sentence; None when it is."""
    status: Any = obj.get("status") or {}
    stamp, ours = status.get("reconciledBy"), release_stamp()
    if stamp == ours:
        return None
    if not stamp:
        return "no status.reconciledBy (last reconciled by an earlier release)"
    return f"status.reconciledBy {stamp} is not this release's {ours}"


def unready_reason(obj: Mapping[str, Any]) -> str | None:
    """Why ``obj`` (an LLMEngine or LLMDeployment as cached) is not Ready at its own generation —
    ``status.phase`` not ``Ready``, ``status.observedGeneration`` or the Ready condition's
    ``observedGeneration`` behind ``metadata.generation``, or the Ready condition not ``True`` — as a
    short sentence; None when it is."""
    generation = obj["metadata"].get("generation")
    status: Any = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if status.get("phase") != "Ready":
        return f"status.phase is {status.get('phase')!r}"
    if status.get("observedGeneration") != generation:
        return f"status.observedGeneration {status.get('observedGeneration')} != generation {generation}"
    if ready is None or ready.get("status") != "True":
        return f"condition Ready is {(ready or {}).get('status')!r}"
    if ready.get("observedGeneration", generation) != generation:
        return (
            f"condition Ready observedGeneration {ready.get('observedGeneration')} != generation {generation}"
        )
    return None
