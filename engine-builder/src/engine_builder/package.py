"""``package``: assemble the artifact ``<artifact_root>/<engine_key>/`` and its ``manifest.json``.

Write-once: an artifact directory is never replaced or written into once published — serving pods
mount it (a PVC ``subPath``) or download it. The package is staged in ``.<name>.partial`` and renamed
into place in one step; when ``<artifact_root>/<engine_key>`` already exists (a rebuild after its
cache entry was deleted), the build publishes ``<engine_key>-<build id>`` instead
(:func:`engine_builder.contract.artifact_dir_name`) and reports that location, so the cache entry
moves to it and pods of the old one keep their files. On S3 the same rule holds for the
``<engine_key>/`` prefix (any object under it counts as taken).

Layout (docs/design.md §3)::

    <engine_key>/
      manifest.json            # written last: its presence means every listed file is in place;
                               # "partial": true means a stage the backend needs was skipped
      checkpoint/              # TensorRT-LLM checkpoint (config.json + rank{N}.safetensors), or the
                               # unified HF checkpoint (pytorch backend, tokenizer included)
      engine/                  # config.json + rank{N}.engine (tensorrt backend, when compiled)
      tokenizer/               # tokenizer + config.json for the Triton pre/post-processing models
      draft/                   # draft_tokens_external only: the draft engine's checkpoint/ and
                               # engine/ (its own engine key: manifest "draft")
      triton/                  # model repository: ensemble, preprocessing, tensorrt_llm,
                               # postprocessing[, tensorrt_llm_bls] — or tensorrt_llm (LLM-API)

The Triton files are rendered by :mod:`engine_builder.triton` with paths under ``serving_root``
(where serving pods mount the artifact volume); the operator re-renders them from the
LLMDeployment's server settings, so these are a complete, loadable default. ``auto_map`` entries
that name another repository's code are removed from the packaged configs
(:func:`strip_foreign_auto_map`, listed in the manifest's ``autoMapRemoved``), and the artifact holds
no symbolic link. The Python models'
``1/model.py`` files come from the TensorRT-LLM image when the builder runs in it
(:data:`MODEL_CODE_DIRS`); otherwise the manifest says they are absent.

``manifest.json`` holds the engine key and its inputs (``BuildSpec.key_inputs()``), versions, the
plan, per-rank files, every file's size and sha256, stage timings, and ``partial`` / ``missing``:
a ``tensorrt`` artifact whose compile was skipped (``--skip-compile``) has no ``engine/`` and says
so (``partial: true``, ``missing: ["engine/ ..."]``); ``trtllm-operator cache import`` refuses such
an artifact unless told ``--allow-partial``. ``manifestDigest`` is the
sha256 of the canonical JSON of the manifest *without* ``stageTimings`` (wall-clock figures differ
between two builds of the same inputs; everything else must not).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from engine_builder.artifact_check import sha256_file
from engine_builder.contract import (
    DRAFT_DIR,
    MANIFEST_SCHEMA,
    RUNTIME_LIBRARIES,
    artifact_dir_name,
    manifest_digest,
    missing_parts,
    runtime_versions,
)
from engine_builder.fetch import parse_source, s3_client
from engine_builder.planner import draft_kv_tokens
from engine_builder.planner.formats import engine_paged_context_fmha
from engine_builder.report import BuildError
from engine_builder.spec import BuildSpec
from engine_builder.triton import (
    DRAFT_MODEL_NAME,
    ENGINE_LOGITS_TRITON_TYPE,
    SPECULATIVE_DECODING_MODES,
    TEMPLATE_SET,
    LLMAPIModelParams,
    TritonModelParams,
    render_llmapi_model,
    render_trtllm_repository,
)

#: Where TensorRT-LLM images keep the Triton model code (docs/reference/tensorrt-llm.md §0.3); first existing
#: wins.
MODEL_CODE_DIRS: tuple[str, ...] = (
    "/app/all_models",
    "/opt/tritonserver/tensorrtllm_backend/all_models",
)

ProgressFn = Callable[[float, float | None, str, str], None]


@dataclass(frozen=True)
class DraftPart:
    """The draft engine of ``draft_tokens_external``, built in the same Job with its own engine key
    (``key_inputs``: its own build spec's); ``engine_dir`` None when its compile was skipped.
    ``info``: the manifest's ``draft`` entry (model, checkpoint, compile, plan)."""

    engine_key: str
    key_inputs: dict[str, Any]
    checkpoint_dir: Path
    engine_dir: Path | None
    info: dict[str, Any]


def versions() -> dict[str, str | None]:
    """Installed versions of the toolchain, read from the installed distributions at build time
    (None = not installed, e.g. TensorRT and TensorRT-LLM on a CPU ``--skip-compile`` run).

    ``tensorrt_llm`` and ``tensorrt`` (:data:`engine_builder.contract.RUNTIME_LIBRARIES`) are what an
    engine is bound to: the operator compares them with the serving image's (audit A10). TensorRT-LLM
    installs TensorRT as the ``tensorrt`` distribution (NVIDIA/TensorRT-LLM ``requirements.txt``:
    ``tensorrt~=10.x``)."""
    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for dist in (
        *RUNTIME_LIBRARIES,
        "nvidia-modelopt",
        "torch",
        "transformers",
        "trtllm-engine-builder",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def triton_params(spec: BuildSpec, plan: dict[str, Any], key_dir: str) -> TritonModelParams:
    """Default serving settings for the artifact's own model repository (paths under ``key_dir``).
    With a draft model (``draft_tokens_external``): the BLS and the draft model, whose KV cache is
    bounded by :func:`engine_builder.planner.draft_kv_tokens` of the plan's limits."""
    sd = spec.build.speculative_decoding
    decoding_mode = SPECULATIVE_DECODING_MODES.get(sd.mode)
    la = sd.lookahead
    has_draft = spec.draft_spec() is not None
    draft_tokens = None
    if has_draft and plan.get("max_batch_size") and plan.get("max_seq_len"):
        draft_tokens = draft_kv_tokens(
            int(plan["max_batch_size"]), int(plan["max_seq_len"]), int(plan.get("tokens_per_block") or 32)
        )
    return TritonModelParams(
        engine_dir=f"{key_dir}/engine",
        tokenizer_dir=f"{key_dir}/tokenizer",
        triton_max_batch_size=int(plan.get("max_batch_size") or 64),
        max_beam_width=spec.build.max_beam_width,
        kv_cache_free_gpu_mem_fraction=float(plan.get("kv_cache_free_gpu_mem_fraction") or 0.9),
        # Only for an engine that can reuse (audit B7): the executor turns reuse off without paged
        # context FMHA, which trtllm-build drops for some KV-cache dtypes and formats.
        enable_kv_cache_reuse=engine_paged_context_fmha(
            spec.backend,
            spec.build.paged_context_fmha,
            spec.quantization.format,
            spec.quantization.kv_cache_dtype,
        ),
        logits_datatype=ENGINE_LOGITS_TRITON_TYPE,
        decoding_mode=decoding_mode,
        include_bls=sd.mode == "draft_tokens_external",
        draft_engine_dir=f"{key_dir}/{DRAFT_DIR}/engine" if has_draft else None,
        draft_max_tokens_in_paged_kv_cache=draft_tokens,
        lookahead_window_size=la.window_size if la else None,
        lookahead_ngram_size=la.ngram_size if la else None,
        lookahead_verification_set_size=la.verification_set_size if la else None,
    )


def llmapi_params(spec: BuildSpec, plan: dict[str, Any], key_dir: str) -> LLMAPIModelParams:
    return LLMAPIModelParams(
        model=f"{key_dir}/checkpoint",
        tensor_parallel_size=spec.parallelism.tensor,
        pipeline_parallel_size=spec.parallelism.pipeline,
        moe_expert_parallel_size=spec.parallelism.expert if spec.parallelism.expert > 1 else None,
        max_batch_size=plan.get("max_batch_size"),
        max_num_tokens=plan.get("max_num_tokens"),
        max_seq_len=plan.get("max_seq_len"),
        kv_cache_free_gpu_mem_fraction=float(plan.get("kv_cache_free_gpu_mem_fraction") or 0.9),
        kv_cache_dtype="fp8" if spec.quantization.kv_cache_dtype == "fp8" else "auto",
    )


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def strip_foreign_auto_map(directory: Path) -> list[str]:
    """Remove every ``auto_map`` entry that names code in another repository from the JSON configs
    directly in ``directory`` (``config.json``, ``tokenizer_config.json``, …); returns what was
    removed, one ``<file>: auto_map.<name> = <reference>`` line each.

    transformers reads an ``auto_map`` reference ``<repo>--<module>.<Class>`` as "download
    ``<module>.py`` from ``<repo>`` and import it" (``trust_remote_code``; huggingface/transformers
    ``src/transformers/dynamic_module_utils.py`` ``get_class_from_dynamic_module``: ``if "--" in
    class_reference: repo_id, class_reference = class_reference.split("--")``), and Triton's
    preprocessing model loads the tokenizer with ``trust_remote_code=True``. References without
    ``--`` name a module file in the artifact itself, which the manifest's digests cover, and stay.
    A changed file is written anew (unlinked first: the copy may be a hard link to the source).
    """
    removed: list[str] = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        auto_map = data.get("auto_map") if isinstance(data, dict) else None
        if not isinstance(auto_map, dict):
            continue
        kept = {}
        for name, ref in auto_map.items():
            refs = ref if isinstance(ref, list) else [ref]
            if any(isinstance(r, str) and "--" in r for r in refs):
                removed.append(f"{directory.name}/{path.name}: auto_map.{name} = {json.dumps(ref)}")
            else:
                kept[name] = ref
        if len(kept) == len(auto_map):
            continue
        if kept:
            data["auto_map"] = kept
        else:
            del data["auto_map"]
        path.unlink()
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return removed


def _refuse_links(staging: Path) -> None:
    """The artifact holds regular files and directories only (copies dereference links; serving
    pods refuse any link, :mod:`engine_builder.artifact_check`)."""
    for path in sorted(staging.rglob("*")):
        if path.is_symlink():
            raise BuildError("InternalError", f"{path.relative_to(staging)}: a symbolic link in the artifact")


def _copy_model_code(repo: Path, layout: str) -> dict[str, str]:
    """Copy ``<model>/1/*.py`` (and ``lib/``) from the image; returns model → source dir."""
    copied: dict[str, str] = {}
    for root in MODEL_CODE_DIRS:
        base = Path(root) / layout
        if not base.is_dir():
            continue
        for model_dir in sorted(p for p in repo.iterdir() if p.is_dir()):
            src = base / model_dir.name / "1"
            if not src.is_dir():
                continue
            for item in src.iterdir():
                if item.suffix == ".py" or (item.is_dir() and item.name == "lib"):
                    target = model_dir / "1" / item.name
                    if item.is_dir():
                        shutil.copytree(item, target, dirs_exist_ok=True)
                    else:
                        shutil.copy2(item, target)
            copied[model_dir.name] = str(src)
        break
    return copied


def package(
    *,
    spec: BuildSpec,
    engine_key: str,
    workdir: Path,
    checkpoint_dir: Path,
    engine_dir: Path | None,
    tokenizer_dir: Path,
    serving_root: str,
    plan: dict[str, Any],
    model_info: dict[str, Any],
    quantize_info: dict[str, Any] | None,
    checkpoint_info: dict[str, Any],
    compile_info: dict[str, Any],
    stage_timings: dict[str, float],
    progress: ProgressFn,
    draft: DraftPart | None = None,
) -> dict[str, Any]:
    """Build the artifact and publish it. Returns ``{"artifact_uri", "manifest_digest",
    "size_bytes", "manifest_path"}``. ``draft``: the draft engine, placed under ``draft/``."""
    root = spec.output.artifact_root
    remote = root.startswith("s3://")
    name = artifact_dir_name(engine_key)
    if _taken(root, name):
        name = artifact_dir_name(engine_key, new_build_id())
        if _taken(root, name):  # a clash of 24 random bits within one second: refuse, never overwrite
            raise BuildError("InternalError", f"{root}/{name} exists already; run the build again")
    final = (workdir / "artifact" / name) if remote else Path(root) / name
    staging = final.with_name(f".{name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    key_dir = f"{serving_root.rstrip('/')}/{engine_key}"

    shutil.copytree(checkpoint_dir, staging / "checkpoint", copy_function=_link_or_copy)
    shutil.copytree(tokenizer_dir, staging / "tokenizer", copy_function=_link_or_copy)
    if engine_dir is not None:
        shutil.copytree(engine_dir, staging / "engine", copy_function=_link_or_copy)
    if draft is not None:
        shutil.copytree(draft.checkpoint_dir, staging / DRAFT_DIR / "checkpoint", copy_function=_link_or_copy)
        if draft.engine_dir is not None:
            shutil.copytree(draft.engine_dir, staging / DRAFT_DIR / "engine", copy_function=_link_or_copy)
    repo = staging / "triton"
    if spec.backend == "tensorrt":
        layout = "inflight_batcher_llm"
        files = render_trtllm_repository(triton_params(spec, plan, key_dir))
    else:
        layout = "llmapi"
        files = render_llmapi_model(llmapi_params(spec, plan, key_dir))
    for rel, content in files.items():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    model_code = _copy_model_code(repo, layout)
    auto_map_removed = [
        line for part in ("checkpoint", "tokenizer") for line in strip_foreign_auto_map(staging / part)
    ]
    _refuse_links(staging)

    entries: list[dict[str, Any]] = []
    all_files = sorted(p for p in staging.rglob("*") if p.is_file())
    total = sum(p.stat().st_size for p in all_files)
    done = 0
    for path in all_files:
        rel = path.relative_to(staging).as_posix()
        size = path.stat().st_size
        entries.append({"path": rel, "size": size, "sha256": sha256_file(path)})
        done += size
        progress(done, total, "bytes", "hashing")
    ranks: dict[int, list[str]] = {}
    for entry in entries:
        m = re.fullmatch(r"(?:draft/)?(checkpoint|engine)/rank(\d+)\.(safetensors|engine)", entry["path"])
        if m:
            ranks.setdefault(int(m.group(2)), []).append(entry["path"])

    missing = missing_parts(spec.backend, compile_info, draft.info["compile"] if draft is not None else None)
    manifest: dict[str, Any] = {
        "schema": MANIFEST_SCHEMA,
        "engineKey": engine_key,
        "keyInputs": spec.key_inputs(),
        "backend": spec.backend,
        "runtimeImage": spec.runtime_image,
        "target": {"gpuProduct": spec.target.gpu_product, "sm": spec.target.sm},
        "versions": versions(),
        "model": model_info,
        "quantization": quantize_info,
        "checkpoint": checkpoint_info,
        "compile": compile_info,
        "partial": bool(missing),
        "missing": missing,
        "plan": plan,
        "triton": {
            "layout": layout,
            "templateSet": TEMPLATE_SET,
            "servingRoot": serving_root,
            "models": sorted({rel.split("/", 1)[0] for rel in files}),
            "modelCode": model_code
            or f"not bundled: the serving image provides 1/model.py (all_models/{layout})",
        },
        "ranks": [{"rank": r, "files": sorted(fs)} for r, fs in sorted(ranks.items())],
        # auto_map entries naming another repository's code, removed (strip_foreign_auto_map)
        "autoMapRemoved": auto_map_removed,
        "files": entries,
        "sizeBytes": total,
        "stageTimings": {k: round(v, 3) for k, v in stage_timings.items()},
    }
    if draft is not None:
        manifest["draft"] = {
            "engineKey": draft.engine_key,
            "keyInputs": draft.key_inputs,
            "dir": DRAFT_DIR,
            "tritonModel": DRAFT_MODEL_NAME,
            **draft.info,
        }
    digest = manifest_digest(manifest)
    manifest["manifestDigest"] = digest
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")

    final.parent.mkdir(parents=True, exist_ok=True)
    if remote:
        shutil.rmtree(final, ignore_errors=True)  # the local copy in the workdir, not the artifact
    elif final.exists():  # appeared since _taken: never write into a published artifact
        raise BuildError("InternalError", f"{final} appeared while packaging; run the build again")
    staging.rename(final)
    uri = str(final)
    if remote:
        uri = _upload_s3(final, root.rstrip("/") + "/" + name, progress)
    return {
        "artifact_uri": uri,
        "manifest_digest": digest,
        "size_bytes": total,
        "manifest_path": str(final / "manifest.json"),
        "versions": runtime_versions(manifest["versions"]),
    }


def new_build_id() -> str:
    """A build id for :func:`~engine_builder.contract.artifact_dir_name`: the UTC time and 6 random
    hex digits (``20261202t031700z-0a1b2c``)."""
    return time.strftime("%Y%m%dt%H%M%Sz", time.gmtime()) + "-" + secrets.token_hex(3)


def _taken(root: str, name: str) -> bool:
    """Whether ``<root>/<name>`` exists: a directory (or anything) on a mounted root, any object under
    the ``<name>/`` prefix on S3."""
    if not root.startswith("s3://"):
        return os.path.lexists(Path(root) / name)
    ref = parse_source(root.rstrip("/") + "/" + name)
    try:
        listed = s3_client().list_objects_v2(Bucket=ref.location, Prefix=ref.prefix, MaxKeys=1)
    except Exception as exc:
        raise BuildError("DownloadFailed", f"listing {root}/{name}/ before publishing: {exc}") from exc
    return int(listed.get("KeyCount", 0)) > 0


def _upload_s3(local: Path, uri: str, progress: ProgressFn) -> str:
    """Upload ``local`` to ``uri`` (``s3://bucket/prefix/<key>``), ``manifest.json`` last."""
    ref = parse_source(uri)
    client = s3_client()
    files = sorted((p for p in local.rglob("*") if p.is_file()), key=lambda p: p.name == "manifest.json")
    total = sum(p.stat().st_size for p in files)
    done = 0
    try:
        for path in files:
            client.upload_file(str(path), ref.location, ref.prefix + path.relative_to(local).as_posix())
            done += path.stat().st_size
            progress(done, total, "bytes", "uploading")
    except Exception as exc:
        raise BuildError("DownloadFailed", f"uploading the artifact to {uri}: {exc}") from exc
    return uri
