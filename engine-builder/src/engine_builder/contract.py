"""The builder's contract with the operator: everything the operator may rely on, and nothing heavy.

The operator (``trtllm_operator``) imports from the builder only this module, the pure capacity
planner (:mod:`engine_builder.planner`, with the quantization-format table) and the Triton
renderers (:mod:`engine_builder.triton`) — an import-linter contract (``.importlinter``) enforces
it, and another one keeps these modules free of torch, ModelOpt, transformers and the pipeline. So
the operator image carries no PyTorch, and reading a progress line does not import a GPU pipeline.

What is here:

* the stages (:data:`STAGES`, :data:`STAGE_HELP`) and the progress-line prefix the builder prints
  (:data:`PROGRESS_PREFIX`, format in :mod:`engine_builder.progress`);
* the report the builder leaves in its termination message and its exit codes (re-exported from
  :mod:`engine_builder.report`);
* the manifest's schema name, digest and "what is missing" rule (:func:`manifest_digest`,
  :func:`missing_parts`), shared by the builder's ``package`` stage and ``trtllm-operator cache``;
* the build-spec types the operator writes (re-exported from :mod:`engine_builder.spec`);
* where the operator delivers a self-contained builder into a stock TensorRT-LLM image
  (:data:`BUNDLE_MOUNT`, :func:`bundle_commands`, :func:`bundle_env`, :func:`without_bundle`;
  docs/engine-builder.md "Running on a stock image").

Names may be added here; renaming one breaks the operator and needs both sides changed together.
"""

from __future__ import annotations

import re
from typing import Any

from engine_builder.artifact_check import EXIT_TAMPERED, TAMPERED, canonical_json, manifest_digest
from engine_builder.release import same_release, version_tuple
from engine_builder.report import (
    DETERMINISTIC_REASONS,
    EXIT_CODES,
    MAX_REPORT_BYTES,
    BuildError,
    Reason,
    Status,
    build_report,
    calibration_report,
    exit_code_for,
)
from engine_builder.spec import (
    DRAFT_TOKEN_ENV,
    ENGINE_KEY_SCHEMA,
    BuildLimits,
    BuildSpec,
    Calibration,
    Lookahead,
    ModelSource,
    Output,
    Parallelism,
    Quantization,
    SpeculativeDecoding,
    Target,
    engine_key,
    lookahead_max_draft_len,
)

__all__ = [
    "BUNDLE_ENV",
    "BUNDLE_LIB",
    "BUNDLE_MOUNT",
    "BUNDLE_PYTHON",
    "BUNDLE_SOURCE",
    "DETERMINISTIC_REASONS",
    "DRAFT_DIR",
    "DRAFT_TOKEN_ENV",
    "ENGINE_KEY_SCHEMA",
    "EXIT_CODES",
    "EXIT_TAMPERED",
    "MANIFEST_SCHEMA",
    "MAX_REPORT_BYTES",
    "PROGRESS_PREFIX",
    "RUNTIME_LIBRARIES",
    "STAGES",
    "STAGE_HELP",
    "TAMPERED",
    "BuildError",
    "BuildLimits",
    "BuildSpec",
    "Calibration",
    "Lookahead",
    "ManifestError",
    "ModelSource",
    "Output",
    "Parallelism",
    "Quantization",
    "Reason",
    "SpeculativeDecoding",
    "Status",
    "Target",
    "artifact_dir_key",
    "artifact_dir_name",
    "build_report",
    "bundle_commands",
    "bundle_env",
    "calibration_report",
    "canonical_json",
    "engine_key",
    "exit_code_for",
    "is_digest",
    "lookahead_max_draft_len",
    "manifest_digest",
    "missing_parts",
    "runtime_versions",
    "same_release",
    "verify_manifest",
    "version_tuple",
    "without_bundle",
]

STAGES: tuple[str, ...] = ("fetch", "inspect", "plan", "quantize", "convert", "compile", "package", "report")

STAGE_HELP: dict[str, str] = {
    "fetch": "download (hf://, s3://) or locate (pvc://, local path) the HF checkpoint; disk preflight",
    "inspect": "config.json + safetensors headers: architecture, parameter count, dtype, tokenizer",
    "plan": "capacity plan for the target GPU; refuse what cannot fit; derive build limits",
    "quantize": "ModelOpt calibration (fp8, int8_sq, int4_awq, w4a8_awq, nvfp4, mxfp8; KV fp8/int8)",
    "convert": "TensorRT-LLM checkpoint per TP x PP rank, or unified HF checkpoint (pytorch backend)",
    "compile": "trtllm-build with flags from the spec and plan (tensorrt backend only)",
    "package": "artifact <artifact_root>/<engine_key>[-<build id>]/ (a new directory, never a replaced "
    "one): checkpoint, engine, tokenizer, Triton repo, manifest",
    "report": "compact JSON result to the termination-message path; exit code = failure class",
}

#: First word of the machine-readable progress line (``engine_builder.progress``).
PROGRESS_PREFIX = "TRTLLM_BUILDER_PROGRESS"

MANIFEST_SCHEMA = "engine-builder.trtllm-operator.dev/manifest/v1"

# ------------------------------------------------------------------------------------------------
# The self-contained builder delivered into a stock image (docs/engine-builder.md, "Running on a
# stock image").

#: Where the delivery image (the operator image, operator/Dockerfile) keeps the builder bundle:
#: ``lib/`` is a ``pip install --no-deps --target`` of engine-builder and of the pure-Python packages
#: a TensorRT-LLM image lacks (``engine-builder/bundle-requirements.txt``), made by
#: ``hack/build-builder-bundle.sh``. No torch, transformers or TensorRT-LLM: the image's own are used.
BUNDLE_SOURCE = "/opt/engine-builder"
#: Where the builder Job mounts the shared volume the init container copies the bundle into.
BUNDLE_MOUNT = "/opt/trtllm-builder"
#: The bundle's import path inside the builder container (``PYTHONPATH``).
BUNDLE_LIB = f"{BUNDLE_MOUNT}/lib"
#: Environment variable naming the bundle's import path, so the builder can drop it from the
#: environment of the tools it starts (``trtllm-build`` must see the image's own ModelOpt).
BUNDLE_ENV = "ENGINE_BUILDER_BUNDLE"
#: The interpreter the builder container runs: the image's ``python3`` from its ``PATH`` (in
#: ``nvcr.io/nvidia/tritonserver:<yy.mm>-trtllm-python-py3`` that is the venv TensorRT-LLM is
#: installed in: triton-inference-server/tensorrtllm_backend r26.03
#: ``dockerfile/Dockerfile.triton.trt_llm_backend``: ``python3.12 -m venv /opt/venv-tritonserver``,
#: ``ENV PATH="/opt/venv-tritonserver/bin:${PATH}"``, then ``pip3 install tensorrt_llm==…``).
BUNDLE_PYTHON = "python3"


def bundle_commands(python: str = BUNDLE_PYTHON) -> tuple[list[str], list[str]]:
    """``(init container command, builder command prefix)`` of a Job that runs the bundle.

    The init container (the delivery image) copies :data:`BUNDLE_SOURCE` onto the shared volume at
    :data:`BUNDLE_MOUNT`; the builder container (the stock TensorRT-LLM image) runs the image's own
    ``python`` with :data:`BUNDLE_LIB` on ``PYTHONPATH`` (set by the Job: :func:`bundle_env`), so the
    image's torch, transformers and TensorRT-LLM are the ones used. The prefix is followed by the
    ``run`` arguments.
    """
    return (["cp", "-R", f"{BUNDLE_SOURCE}/.", f"{BUNDLE_MOUNT}/"], [python, "-m", "engine_builder"])


def bundle_env() -> dict[str, str]:
    """The builder container's environment for the bundle: its import path first on ``PYTHONPATH``
    (ahead of the image's site-packages), :data:`BUNDLE_ENV` naming it, and ``PYTHONSAFEPATH`` so
    ``python3 -m`` does not put the working directory first on the path (the Triton image's is
    ``/app``, with ``tools/``, ``scripts/`` and ``examples/`` in it; Python >= 3.11 reads the
    variable, older ones ignore it)."""
    return {"PYTHONPATH": BUNDLE_LIB, BUNDLE_ENV: BUNDLE_LIB, "PYTHONSAFEPATH": "1"}


def without_bundle(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` for a tool the builder starts (``trtllm-build``): the bundle's import path removed
    from ``PYTHONPATH``, so the tool imports the image's own packages (its ModelOpt, not the
    bundle's). Unchanged when :data:`BUNDLE_ENV` is not set (engine-builder installed in the image)."""
    bundle = environ.get(BUNDLE_ENV)
    if not bundle:
        return dict(environ)
    env = dict(environ)
    kept = [p for p in env.get("PYTHONPATH", "").split(":") if p and p.rstrip("/") != bundle.rstrip("/")]
    if kept:
        env["PYTHONPATH"] = ":".join(kept)
    else:
        env.pop("PYTHONPATH", None)
    return env


# ------------------------------------------------------------------------------------------------
# The manifest


#: A build id: UTC time of the publish and 6 random hex digits (``20261202t031700z-0a1b2c``).
_ARTIFACT_DIR = re.compile(r"(?P<key>[0-9a-f]{64})(?:-[0-9]{8}t[0-9]{6}z-[0-9a-f]{6})?")


def artifact_dir_name(engine_key: str, build_id: str | None = None) -> str:
    """The directory a build publishes its artifact as, inside the artifact root: ``<engine_key>``,
    or ``<engine_key>-<build id>`` when ``<engine_key>`` already exists there. Artifact directories
    are write-once: serving pods mount them (a PVC ``subPath``) or download them, so a rebuild of the
    same key publishes a new directory and the cache entry moves to it; the old one stays for the
    pods that still use it."""
    return f"{engine_key}-{build_id}" if build_id else engine_key


def artifact_dir_key(name: str) -> str | None:
    """The engine key of an artifact directory named by :func:`artifact_dir_name`, or None when
    ``name`` is no such name."""
    m = _ARTIFACT_DIR.fullmatch(name)
    return m.group("key") if m else None


#: A digest as the manifest and the report write it.
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def is_digest(value: object) -> bool:
    """Whether ``value`` is a digest as :func:`manifest_digest` writes it (``sha256:<64 hex>``)."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


class ManifestError(ValueError):
    """A ``manifest.json`` that does not check out; the message names the manifest field."""


#: Fields :func:`verify_manifest` requires (what an index record and serving read).
#: Where the draft engine of ``draft_tokens_external`` lies inside the target's artifact
#: (``checkpoint/`` and ``engine/`` under it; the manifest's ``draft`` entry describes it).
DRAFT_DIR = "draft"

MANIFEST_REQUIRED = ("engineKey", "keyInputs", "runtimeImage", "target", "backend", "manifestDigest", "files")


def verify_manifest(manifest: dict[str, Any], *, expected_key: str | None = None) -> None:
    """Check an artifact's ``manifest.json``: the one verifier of the builder's ``report`` stage
    (which reads back the manifest it published) and ``trtllm-operator cache import``.

    * every field of :data:`MANIFEST_REQUIRED` is present;
    * ``engineKey`` is the sha256 of ``keyInputs`` (and equals ``expected_key`` when given);
    * ``manifestDigest`` is ``sha256:<hex>`` and matches the manifest's content;
    * ``files`` (what serving loads: engine, checkpoint, tokenizer, Triton repository) is a
      non-empty list whose entries each have a ``path``, an integer ``size`` and a ``sha256``.

    Raises :class:`ManifestError` naming the field at fault.
    """
    for field in MANIFEST_REQUIRED:
        if field not in manifest:
            raise ManifestError(
                f"manifest: missing field {field!r}; is this an engine-builder manifest.json?"
            )
    key = str(manifest["engineKey"])
    if engine_key(manifest["keyInputs"]) != key:
        raise ManifestError(
            "manifest.engineKey: not the sha256 of keyInputs; the manifest was edited or is corrupt"
        )
    if expected_key is not None and key != expected_key:
        raise ManifestError(
            f"manifest.engineKey: {key[:12]}… is not the expected engine key {expected_key[:12]}…; "
            "the artifact was built from another spec"
        )
    digest = manifest["manifestDigest"]
    if not is_digest(digest) or manifest_digest(manifest) != digest:
        raise ManifestError("manifest.manifestDigest: does not match the manifest's content")
    files = manifest["files"]
    if not isinstance(files, list) or not files:
        raise ManifestError("manifest.files: empty; the artifact lists no file to serve")
    for i, entry in enumerate(files):
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("size"), int)
            and re.fullmatch(r"[0-9a-f]{64}", str(entry.get("sha256"))) is not None
        )
        if not ok:
            raise ManifestError(f"manifest.files[{i}]: needs path, size and a sha256 hex digest")


def missing_parts(
    backend: str, compile_info: dict[str, Any], draft_compile_info: dict[str, Any] | None = None
) -> list[str]:
    """What a loadable artifact of ``backend`` needs but this one lacks (empty = complete).

    ``compile_info``: the manifest's ``compile`` entry (``status`` done | skipped, ``reason``). The
    ``pytorch`` backend serves the checkpoint and needs no engine; ``tensorrt`` needs ``engine/``
    and, with a draft model (``draft_compile_info``: the manifest's ``draft.compile``), ``draft/engine/``.
    """
    out = _missing_engine(backend, compile_info, "engine/")
    if draft_compile_info is not None:
        out += _missing_engine(backend, draft_compile_info, "draft/engine/")
    return out


def _missing_engine(backend: str, compile_info: dict[str, Any], where: str) -> list[str]:
    if backend != "tensorrt" or compile_info.get("status") == "done":
        return []
    status = compile_info.get("status") or "not run"
    why = compile_info.get("reason") or status
    return [f"{where} (compile {status}: {why}): Triton's TensorRT-LLM backend has no engine to load"]


# ------------------------------------------------------------------------------------------------
# The runtime an engine is bound to

#: Distribution name → product name of the libraries an artifact is bound to (audit A10): an engine
#: deserializes only on the TensorRT that built it, a checkpoint loads only on a TensorRT-LLM that
#: knows its format. The builder records their installed versions in ``manifest.json`` ``versions``
#: and in its report's ``versions`` (``None``: not installed, e.g. a CPU ``--skip-compile`` run); the
#: operator copies them to ``status.artifact`` and compares them with the serving image's.
RUNTIME_LIBRARIES: dict[str, str] = {"tensorrt_llm": "TensorRT-LLM", "tensorrt": "TensorRT"}


def runtime_versions(versions: dict[str, Any] | None) -> dict[str, str | None]:
    """The :data:`RUNTIME_LIBRARIES` entries of a manifest's or report's ``versions`` (every key
    present; ``None`` for a library not installed or not recorded)."""
    data = versions or {}
    return {
        name: (str(data[name]) if data.get(name) not in (None, "") else None) for name in RUNTIME_LIBRARIES
    }
