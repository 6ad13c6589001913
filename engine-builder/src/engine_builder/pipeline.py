"""The builder pipeline and the ``engine-builder`` command line.

::

    engine-builder run --spec build.yaml --workdir DIR [--from-stage STAGE] [--skip-compile]
                       [--pvc-root /models] [--serving-root PATH]
    engine-builder check --spec build.yaml [--pvc-root /models]
    engine-builder stages
    engine-builder make-tiny-model DIR [--layers N ...]

Stages run in order — ``fetch → inspect → plan → quantize → convert → compile → package →
report`` — each recording ``<workdir>/state/<stage>.json`` (status ``done`` or ``skipped`` with a
reason, seconds, a digest of the inputs it used, and its result) once its outputs are in place. A
re-run skips every stage whose record is present, whose inputs digest matches the spec, and none of
whose dependencies (:data:`STAGE_DEPENDS`) re-ran — make-style. So a crash resumes after the last
completed stage, and a spec that only changes tensor parallelism re-shards the existing calibration
instead of calibrating again (:data:`STAGE_INPUTS`). ``--from-stage`` forgets that stage and every
later one.

``--skip-compile`` is for machines without the TensorRT-LLM toolchain (tests, the CPU demo): the
``compile`` stage is recorded as ``skipped`` (never ``done``), the manifest says so, and the report's
status is ``Partial`` rather than ``Succeeded``. A later run without the flag compiles and
re-packages. For the ``pytorch`` backend ``compile`` is always skipped (nothing to compile) and the
build is ``Succeeded``.

The ``report`` stage always runs, also after a failure: it writes the compact JSON
(:mod:`engine_builder.report`) to ``spec.output.termination_log`` and ``<workdir>/report.json``,
prints it, and the process exits with the failure class's code. SIGTERM (the Job's
``activeDeadlineSeconds`` or a deleted pod) becomes reason ``Timeout`` so the report is still
written within the grace period.

``check`` runs the plan stage's checks only, on a model that lies on a mounted volume (``pvc://``,
a local directory): it locates the model, inspects ``config.json`` and the safetensors headers, and
plans — no download, no GPU, no TensorRT-LLM, nothing written but the failure report. The operator
cannot read a ``pvc://`` model before a build, so the builder Job runs it first, as an init container
of the small delivery image: a spec the model refuses (tensor parallelism that does not divide the
attention heads, a model that does not fit) fails the Job in seconds with the report the plan stage
would write, before the multi-GB TensorRT-LLM image is pulled (:func:`check`).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from pydantic import ValidationError

from engine_builder import tinymodel
from engine_builder.artifact_check import canonical_json
from engine_builder.contract import STAGE_HELP, STAGES, runtime_versions, verify_manifest
from engine_builder.convert import convert, copy_tokenizer
from engine_builder.fetch import fetch, locate, parse_source
from engine_builder.inspection import inspect_model, read_hf_config
from engine_builder.package import DraftPart, package, versions
from engine_builder.planner import PlanInputError, lookup, plan_from_build_spec
from engine_builder.planner.formats import (
    KV_CACHE_DTYPES,
    format_info,
    format_refusal,
    kv_dtypes_without_backend,
    kv_info,
    runtime_cannot_load,
    runtime_lacks_backend,
)
from engine_builder.progress import Progress
from engine_builder.quantize import STATE_FILE, needs_quantization, quantize
from engine_builder.redaction import redact
from engine_builder.report import BuildError, build_report, calibration_report, write_termination_log
from engine_builder.spec import BuildSpec
from engine_builder.trtllm_build import run_build, trtllm_build_command

PVC_ROOT_ENV = "ENGINE_BUILDER_PVC_ROOT"


class _TerminatedError(BaseException):
    """Raised by the SIGTERM handler. A BaseException, like KeyboardInterrupt, so the stages'
    ``except Exception`` classification cannot turn a deadline into e.g. QuantizationFailed."""


@dataclass
class Options:
    skip_compile: bool = False
    pvc_root: str = "/models"
    serving_root: str | None = None


@dataclass
class Context:
    spec: BuildSpec
    engine_key: str
    workdir: Path
    options: Options
    progress: Progress
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Seconds of each stage that ran in this process (the report's stageTimings; resumed stages'
    #: records hold an earlier run's seconds).
    ran: dict[str, float] = field(default_factory=dict)
    #: Stages whose record from an earlier run was reused.
    resumed: list[str] = field(default_factory=list)
    #: The draft engine's build (``draft_tokens_external``): its own spec, key and work directory.
    draft: Context | None = None
    #: The stage running now (a failure is reported against it).
    current: str = "fetch"
    #: The quantized model ``quantize`` leaves on its device for ``convert`` (same process only).
    quantized_model: Any = None

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"

    def path(self, name: str) -> Path:
        return self.workdir / name

    def result(self, stage: str) -> dict[str, Any]:
        result: dict[str, Any] = self.results.get(stage, {}).get("result", {})
        return result

    def report_progress(self, done: float, total: float | None, unit: str, message: str) -> None:
        self.progress.update(done, total, unit, message)


# ------------------------------------------------------------------------------------------------
# Stage implementations: each returns (status, result, skip_reason).

StageOutcome = tuple[str, dict[str, Any], str | None]


def _stage_fetch(ctx: Context) -> StageOutcome:

    m = ctx.spec.model
    res = fetch(
        m.uri,
        revision=m.revision,
        token_env=m.token_env,
        dest=ctx.path("source"),
        pvc_root=ctx.options.pvc_root,
        progress=ctx.report_progress,
    )
    return "done", res.to_json_dict(), None


def _stage_inspect(ctx: Context) -> StageOutcome:

    return "done", inspect_model(Path(ctx.result("fetch")["model_dir"])), None


#: The planner names LLMEngine API paths; the builder reports its own build-spec fields.
_SPEC_FIELDS = {
    "spec.gpu.product": "target.gpu_product",
    "spec.quantization.format": "quantization.format",
    "spec.quantization.kvCacheDtype": "quantization.kv_cache_dtype",
    "spec.quantization.awqBlockSize": "quantization.awq_block_size",
    "spec.parallelism.tensor": "parallelism.tensor",
    "spec.parallelism.pipeline": "parallelism.pipeline",
    "spec.parallelism.expert": "parallelism.expert",
    "spec.parallelism": "parallelism",
    "spec.backend": "backend",
    "spec.build.maxSeqLen": "build.max_seq_len",
    "spec.build.maxBatchSize": "build.max_batch_size",
    "spec.build.maxNumTokens": "build.max_num_tokens",
    "spec.build.maxBeamWidth": "build.max_beam_width",
}


def _spec_field(field: str) -> str:
    return _SPEC_FIELDS.get(field, field)


def _check_target(spec: BuildSpec) -> None:
    """``target.gpu_product`` is in the GPU catalog and ``target.sm`` is its SM; else ``BadSpec``."""
    try:
        gpu = lookup(spec.target.gpu_product)
    except PlanInputError as exc:
        raise BuildError("BadSpec", f"target.gpu_product: {exc.message}", field="target.gpu_product") from exc
    if spec.target.sm != gpu.sm:
        raise BuildError(
            "BadSpec",
            f"target.sm: {spec.target.sm} does not match target.gpu_product {gpu.product}, which is SM "
            f"{gpu.sm} ({gpu.architecture}) in the GPU catalog; set target.sm to {gpu.sm} or fix "
            "target.gpu_product.",
            field="target.sm",
        )


def _check_speculative(spec: BuildSpec) -> None:
    """What the builder cannot build is refused, not built without it (the API refuses the same
    at admission): Medusa/EAGLE need TensorRT-LLM's head-combining converters (1.2
    examples/medusa, examples/eagle ``convert_checkpoint.py``); draft_tokens_external needs the
    draft model; the pytorch backend gets no speculative_config from this builder."""
    sd = spec.build.speculative_decoding
    field = "build.speculative_decoding.mode"
    if sd.mode in ("medusa", "eagle"):
        raise BuildError(
            "BadSpec",
            f"{field}: {sd.mode} needs a checkpoint whose heads TensorRT-LLM's own converter combined "
            f"with the base model (examples/{sd.mode}/convert_checkpoint.py); this builder does not, and "
            "an engine without heads is never built: use draft_tokens_external or lookahead_decoding",
            field=field,
        )
    if sd.mode == "draft_tokens_external" and sd.draft_model is None:
        raise BuildError(
            "BadSpec",
            "build.speculative_decoding.draft_model: required with mode draft_tokens_external",
            field="build.speculative_decoding.draft_model",
        )
    if spec.backend == "pytorch" and sd.mode != "none":
        raise BuildError(
            "BadSpec",
            f"{field}: {sd.mode} is not built for backend pytorch (its LLM API takes speculative_config, "
            "which this builder does not render); set mode none or backend tensorrt",
            field=field,
        )


def _check_runtime(spec: BuildSpec, installed: dict[str, str | None]) -> None:
    """The format loads on the TensorRT-LLM this builder runs with (audit A9), read from the installed
    library (``installed``: :func:`engine_builder.package.versions`); else ``BadSpec``. The builder
    runs in the serving image by default, so that is the runtime's version; without TensorRT-LLM
    (a CPU ``--skip-compile`` run) nothing is known and nothing is refused."""
    lacks = runtime_lacks_backend(spec.backend, installed.get("tensorrt_llm"))
    if lacks:
        raise BuildError(
            "BadSpec",
            f"backend: {lacks}; build in (and serve with) an image with a newer TensorRT-LLM, or use "
            "backend: tensorrt",
            field="backend",
        )
    problem = runtime_cannot_load(spec.quantization.format, installed.get("tensorrt_llm"))
    if problem:
        raise BuildError(
            "BadSpec",
            f"quantization.format: {problem}; build in (and serve with) an image with a newer "
            "TensorRT-LLM, or choose another format",
            field="quantization.format",
        )


def _stage_plan(ctx: Context) -> StageOutcome:
    spec = ctx.spec
    _check_speculative(spec)
    _check_target(spec)
    _check_runtime(spec, versions())
    _check_spec_against_model(spec, ctx.result("inspect"))
    hf_config = read_hf_config(Path(ctx.result("fetch")["model_dir"]))
    draft_config = None
    if ctx.draft is not None:
        draft_config = read_hf_config(Path(ctx.draft.result("fetch")["model_dir"]))
        _check_draft_vocabulary(hf_config, draft_config)
    try:
        plan = plan_from_build_spec(spec, hf_config, draft_hf_config=draft_config)
    except PlanInputError as exc:
        field = _spec_field(exc.field)
        raise BuildError("BadSpec", f"{field}: {exc.message}", field=field) from exc
    result = plan.to_json_dict()
    if not plan.fits:
        issues = list(plan.reasons)
        invalid = [i for i in issues if i.kind == "invalid"]
        text = (
            "; ".join(f"{_spec_field(i.field)}: {i.message} Fix: {i.fix}" for i in (invalid or issues))
            or "does not fit"
        )
        if invalid:
            raise BuildError("BadSpec", text, field=_spec_field(invalid[0].field))
        raise BuildError("DoesNotFit", text, field=_spec_field(issues[0].field) if issues else None)
    return "done", result, None


def _check_draft_vocabulary(target: dict[str, Any], draft: dict[str, Any]) -> None:
    """Draft and target must share one vocabulary: the target verifies the draft's token ids
    (NVIDIA/TensorRT-LLM ``examples/draft_target_model/README.md``: "two distinct models trained
    independently but sharing the same vocabulary")."""
    tv, dv = target.get("vocab_size"), draft.get("vocab_size")
    if tv != dv:
        raise BuildError(
            "BadSpec",
            f"build.speculative_decoding.draft_model: vocab_size {dv} differs from the target model's "
            f"{tv}; draft_tokens_external needs a draft model with the target's tokenizer and vocabulary",
            field="build.speculative_decoding.draft_model",
        )


def _check_spec_against_model(spec: BuildSpec, info: dict[str, Any]) -> None:
    """Builder-specific rules the planner does not know (they come from the export tools)."""
    # The head and layer rules of tensor / pipeline parallelism are the planner's
    # (engine_builder.planner.plan.validate, run by the plan stage right after this): one home, one
    # message, the valid sizes listed the way the operator lists them.
    tp = spec.parallelism.tensor
    if spec.backend == "tensorrt" and spec.parallelism.expert > 1:
        # Audit B8: ModelOpt 0.47 export_tensorrt_llm_checkpoint writes mapping.moe_ep_size 1
        # (modelopt/torch/export/tensorrt_llm_utils.py); the LLMEngine API refuses the same layout.
        raise BuildError(
            "BadSpec",
            f"parallelism.expert={spec.parallelism.expert} is not supported by the tensorrt backend: "
            "ModelOpt's TensorRT-LLM checkpoint export writes moe_ep_size 1, so the engine would not be "
            "expert-parallel; set parallelism.expert to 1, or backend pytorch",
            field="parallelism.expert",
        )
    q = spec.quantization
    if format_info(q.format).awq:
        block = q.awq_block_size or 128
        hidden = int(info.get("hidden_size") or 0)
        inter = int(info.get("intermediate_size") or 0)
        for name, dim in (("hidden_size", hidden), ("intermediate_size", inter)):
            if dim and (dim % tp != 0 or (dim // tp) % block != 0):
                raise BuildError(
                    "BadSpec",
                    f"quantization.awq_block_size={block}: {name}={dim} split over tensor parallelism "
                    f"{tp} gives {dim / tp:g} per rank, not a multiple of the block; "
                    "use awq_block_size 64 or a smaller tensor parallelism",
                    field="quantization.awq_block_size",
                )
    if spec.backend not in kv_info(q.kv_cache_dtype).backends:
        raise BuildError(
            "BadSpec",
            f"quantization.kv_cache_dtype {q.kv_cache_dtype} is not supported by backend {spec.backend}; "
            "use one of "
            + ", ".join(k for k in KV_CACHE_DTYPES if k not in kv_dtypes_without_backend(spec.backend)),
            field="quantization.kv_cache_dtype",
        )
    if spec.backend not in format_info(q.format).backends:
        raise BuildError(
            "BadSpec", "; ".join(format_refusal(spec.backend, q.format)), field="quantization.format"
        )


def _stage_quantize(ctx: Context) -> StageOutcome:

    if not needs_quantization(ctx.spec):
        return "skipped", {}, "format none and KV cache auto: nothing to calibrate"
    out = ctx.path("quantized")
    shutil.rmtree(out, ignore_errors=True)
    summary, ctx.quantized_model = quantize(
        ctx.spec,
        Path(ctx.result("fetch")["model_dir"]),
        out,
        ctx.report_progress,
        token=os.environ.get(ctx.spec.model.token_env) or None,
    )
    return "done", summary, None


def _stage_convert(ctx: Context) -> StageOutcome:

    model_dir = Path(ctx.result("fetch")["model_dir"])
    state = ctx.path("quantized") / STATE_FILE
    quantized = ctx.results.get("quantize", {}).get("status") == "done"
    # The quantized model is handed over from memory and released after the export, so the GPU is
    # free for compile.
    model, ctx.quantized_model = ctx.quantized_model, None
    try:
        summary = convert(
            ctx.spec,
            model_dir,
            state if quantized else None,
            ctx.path("checkpoint"),
            ctx.result("inspect").get("torch_dtype"),
            model=model if quantized else None,
        )
    finally:
        if model is not None:
            del model
            _release_gpu_memory()
    tok = ctx.path("tokenizer")
    shutil.rmtree(tok, ignore_errors=True)
    summary["tokenizer_files"] = copy_tokenizer(model_dir, tok)
    if ctx.spec.backend == "pytorch":
        for name in summary["tokenizer_files"]:
            if not (ctx.path("checkpoint") / name).exists():
                shutil.copy2(tok / name, ctx.path("checkpoint") / name)
    return "done", summary, None


def _release_gpu_memory() -> None:
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _stage_compile(ctx: Context) -> StageOutcome:

    if ctx.spec.backend == "pytorch":
        return "skipped", {}, "backend pytorch: the checkpoint is served directly, no engine"
    cmd = trtllm_build_command(ctx.spec, ctx.result("plan"), ctx.path("checkpoint"), ctx.path("engine"))
    if ctx.options.skip_compile:
        return "skipped", {"command": cmd, "requested": True}, "--skip-compile"
    shutil.rmtree(ctx.path("engine"), ignore_errors=True)
    result = run_build(
        cmd, ctx.path("logs") / "compile.log", ctx.report_progress, ctx.spec.parallelism.world_size
    )
    return "done", result, None


def _stage_package(ctx: Context) -> StageOutcome:

    compile_info = _compile_info(ctx)
    compiled = compile_info["status"] == "done"
    inspect = ctx.result("inspect")
    fetch = ctx.result("fetch")
    model_info = {
        "uri": ctx.spec.model.uri,
        "revision": fetch.get("revision") or ctx.spec.model.revision,
        "bytes": fetch.get("bytes"),
        **{
            k: inspect.get(k)
            for k in ("model_type", "architectures", "torch_dtype", "params_total", "dtypes", "weights_ok")
        },
    }
    quant = ctx.results.get("quantize", {})
    quantize_info = None
    if quant.get("status") == "done":
        r = quant["result"]
        quantize_info = {
            k: r.get(k)
            for k in (
                "format",
                "kv_cache_dtype",
                "awq_block_size",
                "device",
                "dataset",
                "samples",
                "tokens",
                "batch_size",
                "max_seq_length",
                "modelopt",
                "seed",
            )
        }
    root = ctx.spec.output.artifact_root
    serving_root = ctx.options.serving_root or (root if not root.startswith("s3://") else "/artifacts")
    timings = {s: rec["seconds"] for s, rec in ctx.results.items() if "seconds" in rec}
    result = package(
        spec=ctx.spec,
        engine_key=ctx.engine_key,
        workdir=ctx.workdir,
        checkpoint_dir=ctx.path("checkpoint"),
        engine_dir=ctx.path("engine") if compiled else None,
        tokenizer_dir=ctx.path("tokenizer"),
        serving_root=serving_root,
        plan=ctx.result("plan"),
        model_info=model_info,
        quantize_info=quantize_info,
        # What the checkpoint is, not how this run made it (timings, from memory or loaded): the
        # manifest digest must not depend on whether convert resumed.
        checkpoint_info={k: v for k, v in ctx.result("convert").items() if k not in _CONVERT_RUN_KEYS},
        compile_info=compile_info,
        stage_timings=timings,
        progress=ctx.report_progress,
        draft=_draft_part(ctx.draft) if ctx.draft is not None else None,
    )
    return "done", result, None


def _compile_info(ctx: Context) -> dict[str, Any]:
    """The manifest's ``compile`` entry of ``ctx``'s engine."""
    rec = ctx.results.get("compile", {})
    return {
        "status": rec.get("status"),
        "reason": rec.get("reason"),
        "command": _portable_command(rec.get("result", {}).get("command"), ctx.workdir),
    }


def _draft_part(draft: Context) -> DraftPart:
    """The draft engine's pieces for the target's artifact (its ``draft/`` directory)."""
    compile_info = _compile_info(draft)
    fetch = draft.result("fetch")
    inspect = draft.result("inspect")
    return DraftPart(
        engine_key=draft.engine_key,
        key_inputs=draft.spec.key_inputs(),
        checkpoint_dir=draft.path("checkpoint"),
        engine_dir=draft.path("engine") if compile_info["status"] == "done" else None,
        info={
            "model": {
                "uri": draft.spec.model.uri,
                "revision": fetch.get("revision") or draft.spec.model.revision,
                "bytes": fetch.get("bytes"),
                **{k: inspect.get(k) for k in ("model_type", "architectures", "torch_dtype", "params_total")},
            },
            "checkpoint": {k: v for k, v in draft.result("convert").items() if k not in _CONVERT_RUN_KEYS},
            "compile": compile_info,
            "plan": draft.result("plan"),
        },
    )


_CONVERT_RUN_KEYS = frozenset({"tokenizer_files", "model_source", "load_seconds", "export_seconds"})


def _portable_command(cmd: Any, workdir: Path) -> list[str] | None:
    """The trtllm-build argv with the work directory replaced by ``$WORKDIR`` (manifest stability)."""
    if not isinstance(cmd, list):
        return None
    return [str(a).replace(str(workdir), "$WORKDIR") for a in cmd]


STAGE_FUNCS: dict[str, Callable[[Context], StageOutcome]] = {
    "fetch": _stage_fetch,
    "inspect": _stage_inspect,
    "plan": _stage_plan,
    "quantize": _stage_quantize,
    "convert": _stage_convert,
    "compile": _stage_compile,
    "package": _stage_package,
}


# ------------------------------------------------------------------------------------------------
# Records


#: What each stage reads: a stage re-runs when one of these re-ran in this run (``draft``: any
#: stage of the draft engine's build).
STAGE_DEPENDS: dict[str, tuple[str, ...]] = {
    "fetch": (),
    "inspect": ("fetch",),
    "plan": ("inspect", "draft"),
    "quantize": ("fetch",),
    "convert": ("fetch", "inspect", "quantize"),
    "compile": ("plan", "convert"),
    "package": ("fetch", "inspect", "plan", "quantize", "convert", "compile", "draft"),
}

#: The engine-key inputs each stage's output depends on (None = all of them). Calibration does not
#: depend on parallelism or build limits, so changing tensor parallelism re-shards the existing
#: calibration instead of re-running it.
STAGE_INPUTS: dict[str, tuple[str, ...] | None] = {
    "fetch": ("model",),
    "inspect": ("model",),
    "quantize": ("model", "quantization"),
}


def _dependents(stage: str) -> list[str]:
    """``stage`` and every stage that reads it, directly or not (:data:`STAGE_DEPENDS`), in order."""
    out = [stage]
    for later in STAGES[STAGES.index(stage) + 1 : -1]:
        if set(STAGE_DEPENDS[later]) & set(out):
            out.append(later)
    return out


def stage_inputs_digest(spec: BuildSpec, stage: str) -> str:
    """sha256 over the key inputs ``stage`` depends on (:data:`STAGE_INPUTS`)."""
    inputs = spec.key_inputs()
    keys = STAGE_INPUTS.get(stage)
    subset = {k: inputs[k] for k in keys} if keys else inputs
    return hashlib.sha256(canonical_json({"stage": stage, "inputs": subset}).encode()).hexdigest()


def _load_records(ctx: Context) -> None:
    ctx.state_dir.mkdir(parents=True, exist_ok=True)
    (ctx.state_dir / "engine_key").write_text(ctx.engine_key + "\n")
    (ctx.state_dir / "key_inputs.json").write_text(
        json.dumps(ctx.spec.key_inputs(), indent=2, sort_keys=True)
    )
    for stage in STAGES:
        path = ctx.state_dir / f"{stage}.json"
        if path.exists():
            try:
                ctx.results[stage] = json.loads(path.read_text())
            except ValueError:
                path.unlink()


def _forget_from(ctx: Context, stage: str) -> None:
    for later in STAGES[STAGES.index(stage) :]:
        (ctx.state_dir / f"{later}.json").unlink(missing_ok=True)
        ctx.results.pop(later, None)


def _complete(ctx: Context, stage: str) -> bool:
    rec = ctx.results.get(stage)
    if not rec or rec.get("status") not in ("done", "skipped"):
        return False
    if rec.get("inputs") != stage_inputs_digest(ctx.spec, stage):
        return False
    # A compile skipped on request is not complete once the flag is gone.
    return not (stage == "compile" and rec.get("reason") == "--skip-compile" and not ctx.options.skip_compile)


def _record(ctx: Context, stage: str, outcome: StageOutcome, seconds: float) -> None:
    status, result, reason = outcome
    rec = {
        "stage": stage,
        "status": status,
        "seconds": round(seconds, 3),
        "inputs": stage_inputs_digest(ctx.spec, stage),
        "result": result,
    }
    if reason:
        rec["reason"] = reason
    path = ctx.state_dir / f"{stage}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(rec, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)
    ctx.results[stage] = rec


# ------------------------------------------------------------------------------------------------
# Running


def load_spec(path: Path) -> BuildSpec:
    """Read and validate the build spec (YAML or JSON). Raises ``BadSpec`` naming the field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BuildError("BadSpec", f"cannot read the build spec {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise BuildError("BadSpec", f"{path} is not valid YAML/JSON: {exc}") from exc
    try:
        return BuildSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        raise BuildError("BadSpec", problems, field=loc or None) from exc


def termination_log_of(spec_path: Path) -> str:
    """``output.termination_log`` from the raw spec document, even when the spec is invalid (the
    failure report must still reach the operator); the Kubernetes default otherwise."""
    try:
        data = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
        value = data["output"]["termination_log"]
    except Exception:
        return "/dev/termination-log"
    return value if isinstance(value, str) and value else "/dev/termination-log"


def run(spec_path: Path, workdir: Path, from_stage: str | None, options: Options) -> int:
    """Run the pipeline; returns the process exit code."""
    workdir.mkdir(parents=True, exist_ok=True)
    progress = Progress(workdir / "progress.json", STAGES)
    termination_log = termination_log_of(spec_path)
    ctx: Context | None = None
    failure: BuildError | None = None
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise _TerminatedError()

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        spec = load_spec(spec_path)
        termination_log = spec.output.termination_log
        ctx = Context(spec, spec.engine_key(), workdir, options, progress)
        _load_records(ctx)
        if from_stage:
            missing = [s for s in STAGES[: STAGES.index(from_stage)] if not _complete(ctx, s)]
            if missing:
                raise BuildError(
                    "BadSpec", f"--from-stage {from_stage}: earlier stage {missing[0]} has not completed"
                )
            _forget_from(ctx, from_stage)
        print(
            f"[builder] engine key {ctx.engine_key} ({spec.backend}, {spec.quantization.format}, "
            f"tp={spec.parallelism.tensor} pp={spec.parallelism.pipeline})",
            flush=True,
        )
        reran: set[str] = set()
        draft_spec = spec.draft_spec()
        if draft_spec is not None:
            ctx.draft = _draft_context(ctx, draft_spec)
            if _build_draft(ctx.draft):
                reran.add("draft")
        _run_stages(ctx, STAGES[:-1], reran)
    except BuildError as exc:
        failure = exc
    except _TerminatedError:
        failure = BuildError(
            "Timeout", "terminated by SIGTERM (activeDeadlineSeconds reached or pod deleted)"
        )
    except MemoryError as exc:
        failure = BuildError("HostOutOfMemory", f"{exc}")
    except Exception as exc:
        print(redact(traceback.format_exc()), file=sys.stderr, end="", flush=True)
        failure = BuildError("InternalError", f"{type(exc).__name__}: {exc}")
    finally:
        signal.signal(signal.SIGTERM, previous)
    if failure is not None and failure.stage is None:
        failure.stage = ctx.current if ctx is not None else "fetch"
    return _report(ctx, failure, termination_log, progress, workdir)


#: What ``check`` runs after locating the model: the stages that read only its config and headers.
CHECK_STAGES: tuple[str, ...] = ("inspect", "plan")


def check(spec_path: Path, options: Options) -> int:
    """The plan stage's checks of a model on a mounted volume, in a scratch directory; returns the
    exit code ``run`` would return for the same classified failure (0 when the plan holds, when the
    model is not on a volume — a download is the build's —, or when the check itself fails
    unexpectedly: it never stops a build the plan stage would let through). A failure writes the
    same report as ``run``'s report stage (reason, message naming the build-spec field, stage) to
    ``spec.output.termination_log``, which the operator reads as it reads the builder's."""
    termination_log = termination_log_of(spec_path)
    failure: BuildError | None = None
    ctx: Context | None = None
    with tempfile.TemporaryDirectory(prefix="engine-builder-check-") as tmp:
        workdir = Path(tmp)
        progress = Progress(workdir / "progress.json", STAGES)
        try:
            spec = load_spec(spec_path)
            termination_log = spec.output.termination_log
            ref = parse_source(spec.model.uri, options.pvc_root)
            if ref.scheme not in ("pvc", "local"):
                print(
                    f"[check] {spec.model.uri} is not on a mounted volume: the build's plan stage checks it"
                )
                return 0
            ctx = Context(spec, spec.engine_key(), workdir, options, progress)
            ctx.state_dir.mkdir(parents=True, exist_ok=True)
            ctx.current = "fetch"
            _record(ctx, "fetch", ("done", locate(ref, None, options.pvc_root).to_json_dict(), None), 0.0)
            for stage in CHECK_STAGES:
                ctx.current = stage
                _record(ctx, stage, STAGE_FUNCS[stage](ctx), 0.0)
        except BuildError as exc:
            failure = exc
        except Exception:  # the check's own trouble (e.g. a file it may not read) never stops a build
            print(redact(traceback.format_exc()), file=sys.stderr, end="", flush=True)
            print("[check] could not check; the build's plan stage checks the model", flush=True)
            return 0
        if failure is None:
            print(f"[check] {spec.model.uri}: the plan holds (tp={spec.parallelism.tensor})", flush=True)
            return 0
        if failure.stage is None:
            failure.stage = ctx.current if ctx is not None else "fetch"
        return _report(ctx, failure, termination_log, progress, workdir)


def _run_stages(ctx: Context, stages: Sequence[str], reran: set[str]) -> None:
    """Run ``stages`` in order, make-style (module docstring); ``reran`` collects what re-ran."""
    progress = ctx.progress
    for stage in stages:
        ctx.current = stage
        if _complete(ctx, stage) and not reran.intersection(STAGE_DEPENDS[stage]):
            rec = ctx.results[stage]
            print(
                f"[{stage}] already {rec['status']} ({rec.get('seconds', 0):.1f}s), resuming after it",
                flush=True,
            )
            ctx.resumed.append(stage)
            continue
        reran.add(stage)
        # This stage and every later one that reads it are out of date from here on: forget
        # their records now, so a failure below leaves no record claiming e.g. "package done".
        for dependent in _dependents(stage):
            (ctx.state_dir / f"{dependent}.json").unlink(missing_ok=True)
            ctx.results.pop(dependent, None)
        progress.start(stage, STAGE_HELP[stage])
        started = time.monotonic()
        try:
            status, _, reason = outcome = STAGE_FUNCS[stage](ctx)
        finally:  # a failed stage's seconds are reported too
            seconds = ctx.ran[stage] = time.monotonic() - started
        _record(ctx, stage, outcome, seconds)
        progress.finish(stage, status + (f" ({reason})" if reason else ""), seconds)


#: The draft engine's stages: everything up to its engine; the target's package stage places it.
DRAFT_STAGES: tuple[str, ...] = ("fetch", "inspect", "plan", "quantize", "convert", "compile")
DRAFT_FIELD = "build.speculative_decoding.draft_model"


def _draft_context(ctx: Context, draft_spec: BuildSpec) -> Context:
    """The draft engine's build: its own spec and engine key, in ``<workdir>/draft`` (own stage
    records, so it resumes like the target and is not rebuilt when only the target changes)."""
    workdir = ctx.workdir / "draft"
    workdir.mkdir(parents=True, exist_ok=True)
    draft = Context(
        draft_spec, draft_spec.engine_key(), workdir, ctx.options, Progress(workdir / "progress.json", STAGES)
    )
    _load_records(draft)
    return draft


def _build_draft(draft: Context) -> bool:
    """Run the draft engine's :data:`DRAFT_STAGES`; True when any of them ran (not resumed).
    A failure is reported as the draft model's, naming ``build.speculative_decoding.draft_model``."""
    print(f"[builder] draft model: engine key {draft.engine_key} ({draft.spec.model.uri})", flush=True)
    reran: set[str] = set()
    try:
        _run_stages(draft, DRAFT_STAGES, reran)
    except BuildError as exc:
        exc.message = f"draft model ({DRAFT_FIELD}): {exc.message}"
        if exc.field in (None, "model", "model.uri", "model.revision"):
            exc.field = DRAFT_FIELD
        exc.stage = exc.stage or draft.current
        raise
    return bool(reran)


def _verify_published(pkg: dict[str, Any], key: str) -> BuildError | None:
    """Read back the ``manifest.json`` the package stage published and check it the way
    ``trtllm-operator cache import`` does (:func:`engine_builder.contract.verify_manifest`: key,
    digest, file list), that its digest is the one reported, and that every file it lists (what
    serving loads) is in place with its recorded size. A success is reported only after this."""
    path = Path(str(pkg.get("manifest_path") or ""))
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        verify_manifest(manifest, expected_key=key)
    except (OSError, ValueError) as exc:
        return _unverified(f"manifest {path}: {exc}")
    if manifest["manifestDigest"] != pkg.get("manifest_digest"):
        return _unverified(f"manifest {path}: digest {manifest['manifestDigest']} is not the packaged one")
    for entry in manifest["files"]:
        target = path.parent / entry["path"]
        if not target.is_file() or target.stat().st_size != entry["size"]:
            return _unverified(f"{target}: missing or not {entry['size']} bytes as the manifest lists")
    return None


def _unverified(message: str) -> BuildError:
    error = BuildError("InternalError", f"the published artifact does not verify: {message}")
    error.stage = "report"
    return error


def _report(
    ctx: Context | None, failure: BuildError | None, termination_log: str, progress: Progress, workdir: Path
) -> int:
    progress.start("report", STAGE_HELP["report"])
    timings: dict[str, float] = {}
    skipped: list[str] = []
    engine_key = artifact_uri = digest = None
    size = None
    pkg_versions: dict[str, Any] | None = None
    resumed: list[str] = []
    calibration = None
    if ctx is not None:
        engine_key = ctx.engine_key
        # Timings of this run only: a resumed stage's record holds an earlier run's seconds, and
        # after a failure the records of later stages are an earlier run's leftovers.
        timings = dict(ctx.ran)
        resumed = list(ctx.resumed)
        if ctx.results.get("quantize", {}).get("status") == "done":
            calibration = calibration_report(ctx.result("quantize"))
        last = STAGES.index(failure.stage) if failure is not None and failure.stage in STAGES else len(STAGES)
        for stage in STAGES[: min(last, len(STAGES) - 1)]:
            rec = ctx.results.get(stage)
            if rec and rec.get("status") == "skipped":
                skipped.append(f"{stage}: {rec.get('reason', '')}")
        pkg = ctx.result("package")
        artifact_uri, digest, size = (
            pkg.get("artifact_uri"),
            pkg.get("manifest_digest"),
            pkg.get("size_bytes"),
        )
        pkg_versions = pkg.get("versions")
        if failure is None:
            failure = _verify_published(pkg, ctx.engine_key)
    if failure is not None:
        report = build_report(
            status="Failed",
            reason=failure.reason,
            message=failure.message,
            stage=failure.stage,
            field=failure.field,
            engine_key=engine_key,
            stage_timings=timings,
            skipped=skipped,
            resumed=resumed,
            calibration=calibration,
        )
    else:
        partial = ctx is not None and ctx.results.get("compile", {}).get("reason") == "--skip-compile"
        report = build_report(
            status="Partial" if partial else "Succeeded",
            reason="CompileSkipped" if partial else None,
            message="compile skipped on request (--skip-compile): the artifact has no engine"
            if partial
            else "",
            engine_key=engine_key,
            artifact_uri=artifact_uri,
            manifest_digest=digest,
            size_bytes=size,
            stage_timings=timings,
            skipped=skipped,
            resumed=resumed,
            versions=runtime_versions(pkg_versions) if pkg_versions is not None else None,
            calibration=calibration,
        )
    (workdir / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))
    try:
        write_termination_log(termination_log, report)
    except OSError as exc:
        print(f"[report] cannot write {termination_log}: {exc}", file=sys.stderr, flush=True)
    print(json.dumps(report, sort_keys=True), flush=True)
    progress.finish("report", report["status"], 0.0)
    return int(report["exitCode"])


# ------------------------------------------------------------------------------------------------
# CLI


def _parser() -> argparse.ArgumentParser:

    parser = argparse.ArgumentParser(prog="engine-builder", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the build pipeline (resumes in an existing work directory)")
    r.add_argument("--spec", type=Path, required=True, help="build spec (YAML or JSON)")
    r.add_argument(
        "--workdir", type=Path, required=True, help="scratch + state directory (keep it across retries)"
    )
    r.add_argument(
        "--from-stage", choices=STAGES[:-1], help="forget this stage and later ones, run from here"
    )
    r.add_argument(
        "--skip-compile",
        action="store_true",
        help="do not run trtllm-build (no TensorRT-LLM toolchain here); recorded as skipped, status Partial",
    )
    r.add_argument(
        "--pvc-root",
        default=os.environ.get(PVC_ROOT_ENV, "/models"),
        help=f"where pvc://<claim>/ is mounted (default /models, env {PVC_ROOT_ENV})",
    )
    r.add_argument(
        "--serving-root",
        default=None,
        help="where serving pods mount the artifact root (Triton paths); default: output.artifact_root",
    )
    c = sub.add_parser(
        "check",
        help="the plan stage's checks of a model on a mounted volume (pvc://, a directory); writes "
        "nothing but, on a failure, the report to output.termination_log (creating its directory)",
    )
    c.add_argument("--spec", type=Path, required=True, help="build spec (YAML or JSON)")
    c.add_argument(
        "--pvc-root",
        default=os.environ.get(PVC_ROOT_ENV, "/models"),
        help=f"where pvc://<claim>/ is mounted (default /models, env {PVC_ROOT_ENV})",
    )
    sub.add_parser("stages", help="list the stages")
    tinymodel.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "stages":
        for i, stage in enumerate(STAGES, start=1):
            print(f"{i}. {stage:9s} {STAGE_HELP[stage]}")
        return 0
    if args.command == "check":
        return check(args.spec, Options(pvc_root=args.pvc_root))
    if args.command == "run":
        options = Options(
            skip_compile=args.skip_compile, pvc_root=args.pvc_root, serving_root=args.serving_root
        )
        return run(args.spec, args.workdir, args.from_stage, options)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)
