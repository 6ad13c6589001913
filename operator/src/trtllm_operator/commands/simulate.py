"""``trtllm-operator simulate``: replay a request trace through modelled replicas under a policy.

Tune autoscaling offline against your own traffic before touching GPUs. The replica model (KV-cache
capacity, batch limits) comes from the capacity planner for the given model config, GPU,
quantization and tensor parallelism; the iteration-time model is calibrated to NVIDIA's published
TensorRT-LLM throughput; ``builtin``/``kv-only`` run the operator's own autoscaling
code. See docs/simulator.md.

Exit codes: 0 done, 2 bad input (the message names the flag).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine_builder.planner import BUILD_LIMITS
from trtllm_operator.api.deployment import MAX_REPLICAS
from trtllm_operator.api.wire import DEPLOYMENT_KIND, ENGINE_KIND, FRONTEND_TRTLLM_SERVE
from trtllm_operator.commands import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    add_replica_arguments,
    integer,
    number,
    plain,
    say,
)

if TYPE_CHECKING:
    from trtllm_operator.api.deployment import ServerSpec
    from trtllm_operator.simulate.fleet import ReplicaDoesNotFitError


def register(subparsers: Any) -> None:
    """Add the ``simulate`` sub-command."""
    p = subparsers.add_parser(
        "simulate",
        help="replay a request trace through modelled TensorRT-LLM replicas and an autoscaling policy",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--trace",
        required=True,
        help="Azure trace .csv, Mooncake .jsonl, or poisson:rate=R,duration=S / gamma:rate=R,duration=S,cv=C "
        "(cv: coefficient of variation of inter-arrival times, default 2; poisson is cv=1)",
    )
    p.add_argument(
        "--time-scale",
        type=number("a number > 0"),
        default=1.0,
        help="divide inter-arrival times by K (default 1)",
    )
    add_replica_arguments(p)
    # Unset, so that a flag left out is told from one given: with --deployment the LLMEngine of the
    # input fills it (:func:`engine_flags`), else its default (:data:`_ENGINE_FLAGS`).
    p.set_defaults(**{dest: None for _, dest, _, _ in _ENGINE_FLAGS if dest in _UNSET_DEFAULTS})
    p.add_argument(
        "--kv-cache-free-gpu-mem-fraction",
        type=number("a fraction in (0, 1], e.g. 0.9"),
        default=None,
        help="spec.server.kvCacheFreeGpuMemFraction of the replica (default 0.9, the field's default; "
        "with --deployment the manifest's value, and this flag is refused)",
    )
    p.add_argument(
        "--chunked-context",
        action="store_true",
        default=None,
        help="serve prompts longer than max_num_tokens in chunks, as spec.server.enableChunkedContext "
        "does (default off: such prompts are rejected, counted as dropped; with --deployment the "
        "manifest's value, and this flag is refused)",
    )
    p.add_argument(
        "--reserve-output-tokens",
        type=integer("an integer ≥ 0"),
        default=0,
        help="max_tokens your clients send: GUARANTEED_NO_EVICT reserves prompt + max(output, this) "
        "KV tokens per request (default 0: the actual output length)",
    )
    p.add_argument(
        "--policy",
        default=None,
        help="builtin | capacity | capacity-learned | hpa-queue-compute | kv-only | wva-saturation | "
        "static:N | oracle[:UTILIZATION] (0 < UTILIZATION ≤ 1.5; default builtin)",
    )
    p.add_argument(
        "--deployment",
        metavar="YAML",
        help="an LLMDeployment manifest, read as render -f reads it (several documents, kind: List, a "
        "directory; - reads stdin), or its bare spec.autoscaling: simulate the builtin autoscaler with "
        "exactly these settings, and the replica with its spec.server.kvCacheFreeGpuMemFraction, "
        "enableChunkedContext and maxTokensInPagedKvCache, and the LLMEngine its spec.engineRef names, when "
        "the input holds it, filling the engine flags left out (not --gpu, which stays required: a "
        "warning says when it contradicts spec.gpu.product); --policy, --min-replicas, --max-replicas, "
        "--kv-cache-free-gpu-mem-fraction and --chunked-context are then refused (edit the manifest instead)",
    )
    p.add_argument(
        "--min-replicas",
        type=integer("an integer ≥ 1"),
        default=None,
        help="default 1 (with --deployment: refused)",
    )
    p.add_argument(
        "--max-replicas",
        type=integer("an integer ≥ 1"),
        default=None,
        help="default 64 (with --deployment: refused)",
    )
    p.add_argument(
        "--initial-replicas",
        type=integer("an integer ≥ 0"),
        default=None,
        help="replicas Ready at t=0 (default: the fluid demand of the work arriving around t=0, at least 1; "
        "the oracle's default is its own plan; static:N always starts with N)",
    )
    p.add_argument(
        "--max-gpus",
        type=integer("an integer ≥ 1"),
        default=None,
        help="GPUs available; extra pods stay Pending",
    )
    p.add_argument(
        "--slo-ttft-ms",
        type=number("milliseconds > 0"),
        default=2000.0,
        help="TTFT target in ms (default 2000)",
    )
    p.add_argument(
        "--cold-start-s",
        type=number("seconds ≥ 0"),
        default=60.0,
        help="pod creation to Ready, seconds (default 60)",
    )
    p.add_argument("--routing", choices=("random", "least-outstanding"), default="random")
    p.add_argument(
        "--seed",
        type=integer("an integer"),
        default=0,
        help="seed for routing and synthetic traces (default 0)",
    )
    p.add_argument("--output", choices=("json", "table"), default="table")
    p.add_argument("--timeline", metavar="CSV", help="write a per-interval timeline CSV here")
    p.add_argument(
        "--timeline-interval-s",
        type=number("seconds > 0"),
        default=60.0,
        help="timeline interval (default 60 s)",
    )
    p.add_argument(
        "--decisions",
        metavar="CSV",
        help="write every decision of the operator's policy here (time_s, from_replicas, to_replicas, "
        "reason, message: status.autoscaling.lastDecisions' fields); builtin, capacity, "
        "capacity-learned, kv-only and --deployment",
    )
    p.add_argument("--plot", metavar="PNG", help="write a plot of load, replicas and TTFT here (matplotlib)")
    p.set_defaults(func=run)


def _load_manifest(path: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The LLMDeployment of ``path``, read as ``render -f`` reads it
    (:func:`~trtllm_operator.commands._manifests.read_objects`: a file, a directory, ``-`` for
    standard input, several documents, ``kind: List`` expanded); or, when it holds one document with
    neither ``kind`` nor ``apiVersion``, that document as a bare ``spec`` or ``spec.autoscaling``.
    Second: the LLMEngine its ``spec.engineRef.name`` names when the input holds it (of its
    namespace, as render picks it), else ``None``; that engine is checked as render checks it
    (:func:`_serving_errors`).

    Raises :class:`ValueError` naming ``--deployment`` when the input is not YAML, holds no
    LLMDeployment (naming what it holds instead) or more than one, or render would refuse it;
    :class:`OSError` when it cannot be read.
    """
    import yaml  # noqa: PLC0415

    from trtllm_operator.commands._manifests import BadInputError, read_objects  # noqa: PLC0415

    try:
        objects = read_objects(path)
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise ValueError(f"--deployment {path}: not valid YAML ({reason})") from exc
    except BadInputError as exc:
        raise ValueError(f"--deployment {exc}") from exc
    found = [doc for _, doc in objects if doc.get("kind") == DEPLOYMENT_KIND]
    if len(found) > 1:
        names = ", ".join(_named(doc) for doc in found)
        raise ValueError(
            f"--deployment {path}: {len(found)} LLMDeployments ({names}); simulate takes one: "
            "put the one to simulate in its own file"
        )
    if found:
        doc = found[0]
    elif len(objects) == 1 and not {"kind", "apiVersion"} & objects[0][1].keys():
        doc = objects[0][1]  # a bare spec, or a bare spec.autoscaling mapping
    else:
        held = ", ".join(_named(d) for _, d in objects) or "no object"
        raise ValueError(
            f"--deployment {path}: no LLMDeployment (it holds {held}); give an LLMDeployment manifest "
            "(kind: LLMDeployment, alone, among other documents or in a kind: List) or its bare "
            "spec.autoscaling mapping"
        )
    _check_manifest(path, doc)
    engine = _engine_of(doc, [other for _, other in objects])
    if engine is not None:
        errors = _serving_errors(path, doc, engine)
        if errors:
            raise ValueError("\n".join(errors))
    ref = ((doc.get("spec") or {}).get("engineRef") or {}).get("name")
    if (
        engine is None
        and doc.get("kind") == DEPLOYMENT_KIND
        and ref
        and not any(other.get("kind") == ENGINE_KIND for _, other in objects)  # else the note below
    ):
        # Fresh-user trial 45 A12: the engine in its own file (the usual GitOps layout) was silently
        # replaced by the flags' defaults (BF16 for an FP8 engine: half its KV pool).
        say(
            "simulate",
            "note",
            f"--deployment {path}: the LLMDeployment's spec.engineRef names LLMEngine {ref!r}, which the "
            "input does not hold: the replica is the one the flags describe (--model-config, --gpu, --tp, "
            "--pp, --quantization, --kv-cache-dtype, --max-batch-size, --max-num-tokens, --max-seq-len, "
            "with their defaults). To simulate that engine, give it in the same input: --deployment DIR "
            "(a directory holding both files), or --deployment - with both on standard input ({ cat "
            "DEPLOYMENT.yaml; echo ---; cat ENGINE.yaml; } | trtllm-operator simulate … --deployment -)",
        )
    for _, other in objects:
        if other.get("kind") == ENGINE_KIND and other is not engine:
            # Fresh-user trial 35: the engine beside the deployment was silently not used. Which replica
            # runs instead: the referenced engine's when the input holds it (fresh-user trial 52 #7: this
            # said "the flags describe" beside the note that the replica is that engine's).
            instead = (
                f"the replica is {_named(engine)}'s"
                if engine is not None
                else "the replica is the one the flags describe (--model-config, --gpu, --tp, --pp, "
                "--quantization, --kv-cache-dtype, --max-batch-size, --max-num-tokens, --max-seq-len)"
            )
            say(
                "simulate",
                "note",
                f"--deployment {path}: {_named(other)} is not read (nor checked): the LLMDeployment's "
                f"spec.engineRef names {ref!r}; {instead}",
            )
    return doc, engine


#: The replica's flags an LLMEngine field stands for: ``(flag, args dest, field, default)``; the
#: default is the flag's without an engine (the field's own default, or None: the planner's value).
_ENGINE_FLAGS: tuple[tuple[str, str, str, object], ...] = (
    ("--quantization", "quantization", "spec.quantization.format", "none"),
    ("--kv-cache-dtype", "kv_cache_dtype", "spec.quantization.kvCacheDtype", "auto"),
    ("--tp", "tp", "spec.parallelism.tensor", 1),
    ("--pp", "pp", "spec.parallelism.pipeline", 1),
    ("--max-batch-size", "max_batch_size", "spec.build.maxBatchSize", None),
    ("--max-num-tokens", "max_num_tokens", "spec.build.maxNumTokens", None),
    ("--max-seq-len", "max_seq_len", "spec.build.maxSeqLen", None),
)
#: The dests of :data:`_ENGINE_FLAGS` whose argparse default is not None (set to None by
#: :func:`register`, filled by :func:`engine_flags`).
_UNSET_DEFAULTS = frozenset({"quantization", "kv_cache_dtype", "tp", "pp"})


def engine_flags(args: argparse.Namespace, engine: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Fill the replica's flags left out from ``engine`` (the LLMEngine of the ``--deployment`` input,
    already checked as render checks it), else with their defaults (:data:`_ENGINE_FLAGS`); return
    ``(level, message)`` for what was taken and for each flag given that contradicts the engine
    (the flag wins: it is what the user typed). Fresh-user trial 44 F12: the flags' BF16 defaults were
    simulated beside an FP8 engine, half its KV cache, with only a note that the engine was not read.
    ``--gpu`` (required) is compared, not taken."""
    from engine_builder.planner import PlanInputError, lookup  # noqa: PLC0415
    from trtllm_operator.api.engine import LLMEngineSpec  # noqa: PLC0415

    if engine is None:
        for _, dest, _, default in _ENGINE_FLAGS:
            if getattr(args, dest) is None:
                setattr(args, dest, default)
        return []
    spec = LLMEngineSpec.model_validate(engine.get("spec") or {})
    values: dict[str, object] = {
        "quantization": spec.quantization.format,
        "kv_cache_dtype": spec.quantization.kv_cache_dtype,
        "tp": spec.parallelism.tensor,
        "pp": spec.parallelism.pipeline,
        "max_batch_size": spec.build.max_batch_size,
        "max_num_tokens": spec.build.max_num_tokens,
        "max_seq_len": spec.build.max_seq_len,
    }
    name = str((engine.get("metadata") or {}).get("name"))
    where = f"LLMEngine {name} of --deployment {args.deployment}"
    said: list[tuple[str, str]] = []
    taken: list[str] = []
    for flag, dest, field, default in _ENGINE_FLAGS:
        given, value = getattr(args, dest), values[dest]
        if given is None:
            setattr(args, dest, default if value is None else value)
            if value is not None and value != default:  # the default's value changes nothing
                taken.append(f"{flag} {value} ({field})")
        elif value is not None and given != value:
            said.append(
                (
                    "warning",
                    f"{flag} {given} contradicts {where}, whose {field} is {value}: the flag's {given} is "
                    f"simulated, not the engine. Fix: pass {flag} {value}, or leave {flag} out to take the "
                    "engine's",
                )
            )
    try:
        flag_gpu, engine_gpu = lookup(args.gpu).product, lookup(spec.gpu.product).product
    except PlanInputError:  # a bad --gpu is refused by name when the replica is planned
        flag_gpu = engine_gpu = ""
    if flag_gpu != engine_gpu:
        said.append(
            (
                "warning",
                f"--gpu {args.gpu} contradicts {where}, whose spec.gpu.product is {spec.gpu.product}: the "
                f"flag's {flag_gpu} is simulated, not the engine. Fix: pass --gpu {spec.gpu.product}",
            )
        )
    said.extend(_unsimulated_engine(args, spec, where))
    if taken:
        said.insert(
            0,
            (
                "note",
                f"the replica is LLMEngine {name}'s (--deployment {args.deployment}): {', '.join(taken)}, "
                "taken from its spec where the flag was left out (a flag given overrides its field)",
            ),
        )
    return said


def _unsimulated_engine(args: argparse.Namespace, spec: Any, where: str) -> list[tuple[str, str]]:
    """What of the ``--deployment`` input's LLMEngine (``spec``, an ``LLMEngineSpec``; ``where`` names
    it) the replica does not take, each ``(level, message)`` (fresh-user trial 45 A11): its speculative
    decoding, which the replica does not model (docs/simulator.md, Limits), and its model, which
    ``--model-config`` stands for: a file named ``<org>__<name>.json`` (the operator's hfConfigDir
    layout, :func:`~trtllm_operator.decide.engine_spec.hf_config_name`) or a config.json whose
    ``_name_or_path`` names another model than ``spec.model.source`` is a warning; when nothing in
    the flag says which model it is, a note says it was not compared."""
    from trtllm_operator.decide.engine_spec import hf_config_name, model_config_mismatch  # noqa: PLC0415

    said: list[tuple[str, str]] = []
    sd = spec.build.speculative_decoding
    if sd.mode != "none":
        what = [sd.mode]
        if sd.draft_model is not None:
            what.append(f"draft model {sd.draft_model.source}")
        if sd.max_draft_len:
            what.append(f"maxDraftLen {sd.max_draft_len}")
        said.append(
            (
                "note",
                f"spec.build.speculativeDecoding ({', '.join(what)}) of {where} is not simulated: the "
                "replica is planned without its memory (a draft model's weights and KV cache) and decodes "
                "one token per iteration (docs/simulator.md, Limits)",
            )
        )
    source = spec.model.source
    if hf_config_name(source) is None or not args.model_config:
        return said
    other = model_config_mismatch(str(args.model_config), source)
    if other == "":
        return said
    if other is None:
        said.append(
            (
                "note",
                f"--model-config {args.model_config} is not compared with {where}'s spec.model.source "
                f"{source}: nothing in it names its model; the flag's model is simulated",
            )
        )
        return said
    said.append(
        (
            "warning",
            f"--model-config {args.model_config} seems not to be {where}'s model, spec.model.source "
            f"{source}: {other}. The flag's model is simulated. Fix: pass {source[len('hf://') :]}'s "
            "config.json",
        )
    )
    return said


def _engine_of(deployment: dict[str, Any], objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The LLMEngine of ``objects`` that ``deployment``'s ``spec.engineRef.name`` names, in its
    namespace (one that sets none is taken as in it), as ``render`` picks it; ``None`` when the input
    does not hold it (a bare ``spec.autoscaling`` names none)."""
    if deployment.get("kind") != DEPLOYMENT_KIND:
        return None
    spec = deployment.get("spec") or {}
    ref = (spec.get("engineRef") or {}).get("name")
    namespace = (deployment.get("metadata") or {}).get("namespace")
    for other in objects:
        meta = other.get("metadata") or {}
        if (
            other.get("kind") == ENGINE_KIND
            and meta.get("name") == ref
            and meta.get("namespace") in (None, namespace)
        ):
            return other
    return None


def _serving_errors(path: str, deployment: dict[str, Any], engine: dict[str, Any]) -> list[str]:
    """What ``render -f`` refuses for ``deployment`` served from ``engine`` (both in the input), in
    render's words: the engine's schema (:func:`~trtllm_operator.commands._schema.manifest_errors`),
    its spec (:func:`~trtllm_operator.decide.engine_spec.prepare_engine`, without the model's
    config: simulate plans the replica itself), then the serving gate the controller applies
    (:func:`~trtllm_operator.decide.serving.plan_serving`: an incompatible engine, an API its
    server cannot serve — trtllm-serve with autoscaling, say —, a refused server setting). docs/
    simulator.md promises the manifest is checked as render checks it (fresh-user trial 44 F24: a
    pytorch ``api: openai`` deployment with autoscaling, which render refuses, was simulated). Placement
    is checked as on a cluster with LeaderWorkerSet installed: simulate refuses a replica beyond one
    node itself. Works on copies; empty when render would serve it."""
    import copy  # noqa: PLC0415

    from trtllm_operator.commands._schema import manifest_errors  # noqa: PLC0415
    from trtllm_operator.decide.engine_spec import InvalidEngine, prepare_engine  # noqa: PLC0415
    from trtllm_operator.decide.serving import ServingRefusal, plan_serving  # noqa: PLC0415

    where = f"--deployment {path}: "
    ename = str((engine.get("metadata") or {}).get("name") or "(unnamed)")
    errors = [f"{where}LLMEngine {ename}: {message}" for message in manifest_errors(engine)]
    if errors:
        return errors
    dep, eng = copy.deepcopy(deployment), copy.deepcopy(engine)
    dmeta = dep.setdefault("metadata", {})
    dmeta.setdefault("namespace", "default")
    dmeta.setdefault("uid", "")
    eng.setdefault("metadata", {}).setdefault("namespace", dmeta["namespace"])
    status = eng.setdefault("status", {})
    prepared = prepare_engine(ename, eng.get("spec") or {}, namespace=eng["metadata"]["namespace"])
    if isinstance(prepared, InvalidEngine):
        return [f"{where}LLMEngine {ename}: {prepared.text}"]
    if not status.get("engineKey"):  # a manifest from git, as render keys it
        status["engineKey"] = prepared.key
        status.setdefault("artifact", {"uri": prepared.storage.artifact_uri(prepared.key)})
    plan = plan_serving(dep, eng, gpus_per_node=prepared.gpu.gpus_per_node, lws_installed=True)
    if not isinstance(plan, ServingRefusal):
        return []
    name = dmeta.get("name") or "(unnamed)"
    said = "render refuses it too, and the operator serves nothing for it"
    if plan.incompatibilities:
        return [f"{where}{name}: EngineIncompatible: {p.message()} ({said})" for p in plan.incompatibilities]
    if plan.blocked:
        return [f"{where}{name}: {plan.blocked[0]}: {plan.blocked[1]} ({said})"]
    return []


def _named(doc: dict[str, Any]) -> str:
    """``Kind name`` of a manifest, for messages."""
    meta = doc.get("metadata")
    name = (meta.get("name") if isinstance(meta, dict) else None) or "(unnamed)"
    return f"{doc.get('kind') or '(no kind)'} {name}"


def _check_manifest(path: str, doc: dict[str, Any]) -> None:
    """Refuse what ``render`` and ``kubectl apply`` refuse (misspelled fields such as ``minReplica``,
    values out of range, the CEL rules) with render's messages, one line per error: the autoscaling
    model alone ignores unknown keys, so a typo would silently simulate the default instead."""
    from trtllm_operator.commands._schema import manifest_errors, section_errors  # noqa: PLC0415

    if doc.get("kind") == DEPLOYMENT_KIND:
        name = (doc.get("metadata") or {}).get("name") or "(unnamed)"
        where = f"LLMDeployment {name}: "
        errors = manifest_errors(doc)
    else:  # a bare spec, or a bare spec.autoscaling mapping
        where = ""
        section = doc.get("spec") if "spec" in doc else {"autoscaling": doc}
        autoscaling = section.get("autoscaling") if isinstance(section, dict) else None
        errors = []
        if autoscaling is not None:
            errors = section_errors(DEPLOYMENT_KIND, "spec.autoscaling", autoscaling)
    if errors:
        raise ValueError("\n".join(f"--deployment {path}: {where}{e}" for e in errors))


def _fail(message: str) -> int:
    say("simulate", "error", message)
    return EXIT_BAD_INPUT


#: ``--max-replicas`` when not given.
DEFAULT_MAX_REPLICAS = 64


def _server_spec(manifest: dict[str, Any] | None) -> ServerSpec:
    """``spec.server`` of a ``--deployment`` manifest (a bare ``spec.autoscaling`` mapping has none),
    else the fields' defaults (api.deployment.ServerSpec): the replica's KV free-memory fraction and
    chunked context come from it."""
    from trtllm_operator.api.deployment import ServerSpec  # noqa: PLC0415

    spec = (manifest or {}).get("spec")
    server = spec.get("server") if isinstance(spec, dict) else None
    return ServerSpec.model_validate(server or {})


def replica_frontend(engine: dict[str, Any] | None, server: ServerSpec) -> str:
    """The process that serves the replica, as the operator renders it
    (:func:`trtllm_operator.render.serving.serves_with_trtllm_serve`): ``trtllm-serve`` for a pytorch
    engine (``spec.backend`` of the LLMEngine the input holds) behind ``spec.server.api: openai``, else
    Triton (``tensorrt`` when the input holds no engine, as for the replica's other settings). It decides
    which families the simulated replicas export
    (:attr:`~trtllm_operator.simulate.engine.ReplicaSpec.frontend`)."""
    from trtllm_operator.render.serving import serves_with_trtllm_serve  # noqa: PLC0415
    from trtllm_operator.simulate.engine import FRONTEND_TRITON  # noqa: PLC0415

    if serves_with_trtllm_serve(engine_backend(engine), server.api):
        return FRONTEND_TRTLLM_SERVE
    return FRONTEND_TRITON


def engine_paged_context_fmha(engine: dict[str, Any] | None) -> bool:
    """``spec.build.pagedContextFMHA`` of the LLMEngine the input holds; true (the field's default)
    without one."""
    build = ((engine or {}).get("spec") or {}).get("build") or {}
    return build.get("pagedContextFMHA") is not False


def engine_backend(engine: dict[str, Any] | None) -> str:
    """``spec.backend`` of the LLMEngine the input holds; ``tensorrt`` (the field's default) without one."""
    return str(((engine or {}).get("spec") or {}).get("backend") or "tensorrt")


def engine_max_input_len(engine: dict[str, Any] | None) -> int | None:
    """``spec.build.maxInputLen`` of the LLMEngine the input holds (None without one, or unset): the
    planner derives maxSeqLen above it when maxSeqLen is unset, as the operator does (fresh-user trial
    51 Y5: simulate derived it without, 16,384 where the operator built 131,072; 32,768 since Y4)."""
    value = (((engine or {}).get("spec") or {}).get("build") or {}).get("maxInputLen")
    return None if value is None else int(value)


def _max_input_len_below(max_input_len: int | None, max_seq_len: int | None) -> int | None:
    """``max_input_len`` when it is below ``max_seq_len`` (or ``max_seq_len`` is derived: None), else
    None: a ``--max-seq-len`` at or below the engine's maxInputLen is simulated as given."""
    if max_input_len is None or (max_seq_len is not None and max_input_len >= max_seq_len):
        return None
    return max_input_len


#: ``spec.server`` fields the replica model does not represent, each with its default (what the
#: replica runs) and why: a manifest that sets another value gets a note naming them (fresh-user
#: trial 44 F27: batchSchedulerPolicy max_utilization was simulated as guaranteed_no_evict without a
#: word). The replica honours kvCacheFreeGpuMemFraction, maxTokensInPagedKvCache and
#: enableChunkedContext; the rest (api, image, resources, …) does not change its capacity.
_UNSIMULATED_SERVER: tuple[tuple[str, str, object, str], ...] = (
    (
        "batchSchedulerPolicy",
        "batch_scheduler_policy",
        "guaranteed_no_evict",
        "which reserves each request's whole KV cache when it is scheduled and never pauses one; "
        "max_utilization packs more sequences and pauses some",
    ),
    ("batchingStrategy", "batching_strategy", "inflight_fused_batching", "in-flight batching"),
    ("maxQueueSize", "max_queue_size", 0, "Triton's queue unbounded: no request is rejected for it"),
    (
        "maxQueueDelayMicroseconds",
        "max_queue_delay_microseconds",
        0,
        "requests scheduled without Triton's dynamic-batching delay",
    ),
)


def _unsimulated(server: ServerSpec) -> list[str]:
    """For each field of :data:`_UNSIMULATED_SERVER` that ``server`` sets away from its default:
    ``spec.server.FIELD VALUE is not simulated: the replica runs as DEFAULT (why)``."""
    return [
        f"spec.server.{field} {getattr(server, attr)} is not simulated: the replica runs as {default} ({why})"
        for field, attr, default, why in _UNSIMULATED_SERVER
        if getattr(server, attr) != default
    ]


#: The planner's fix wording (engine_builder.planner.plan, its warnings) → what to pass to this command:
#: the warnings name LLMEngine / LLMDeployment fields; simulate sets some of them by flags.
_FIX_FLAGS: tuple[tuple[str, str], ...] = (
    (r"\(spec\.quantization\.kvCacheDtype\)", "(--kv-cache-dtype)"),
    (r"raise tensor parallelism", "raise tensor parallelism (--tp)"),
    (r"raise tensor \(or pipeline\) parallelism", "raise tensor (or pipeline) parallelism (--tp, --pp)"),
    (r"quantize further \(", "quantize further (--quantization; "),
    (r"use a GPU with more memory", "use a GPU with more memory (--gpu)"),
    (r"use more tensor parallelism", "use more tensor parallelism (--tp)"),
    (r"lower tensor or pipeline parallelism", "lower tensor or pipeline parallelism (--tp, --pp)"),
    (r"a lower maxSeqLen\b", "a lower maxSeqLen (--max-seq-len)"),
    (r"lower maxSeqLen to", "lower maxSeqLen (--max-seq-len) to"),
    (r"use maxSeqLen ≤", "use maxSeqLen (--max-seq-len) ≤"),
    (r"use maxNumTokens ≥", "use maxNumTokens (--max-num-tokens) ≥"),
    (r"set maxSeqLen to see what it needs", "set maxSeqLen (--max-seq-len) to see what it needs"),
)

#: The planner's fields simulate sets by a flag of the same name as ``trtllm-operator plan``'s
#: (:data:`trtllm_operator.commands.plan.FIELD_FLAGS`); ``kvCacheFreeGpuMemFraction`` is the
#: manifest's with ``--deployment`` (:func:`flag_of` and :func:`with_flags` name it).
_FLAG_FIELDS = frozenset(
    {
        "spec.quantization.format",
        "spec.quantization.kvCacheDtype",
        "spec.parallelism.tensor",
        "spec.parallelism.pipeline",
        "spec.gpu.product",
        "spec.build.maxSeqLen",
        "spec.build.maxBatchSize",
        "spec.build.maxNumTokens",
    }
)


def flag_of(field: str, deployment: str | None = None) -> str:
    """``field (--flag)`` for a planner field simulate sets by a flag, else the field.
    ``kvCacheFreeGpuMemFraction`` is the flag's without ``deployment`` and the manifest's with it
    (fresh-user trial 38 F4); ``spec.parallelism`` is ``--tp/--pp`` (simulate has no ``--multi-node``:
    :func:`trtllm_operator.simulate.fleet.one_node_issue`)."""
    from trtllm_operator.commands.plan import FIELD_FLAGS  # noqa: PLC0415

    if field == "spec.server.kvCacheFreeGpuMemFraction":
        return f"{field} of --deployment {deployment}" if deployment else f"{field} ({FIELD_FLAGS[field]})"
    if field == "spec.parallelism":
        return f"{field} (--tp/--pp)"
    if field.startswith("spec.server.") and deployment:  # maxTokensInPagedKvCache: no flag sets it
        return f"{field} of --deployment {deployment}"
    return f"{field} ({FIELD_FLAGS[field]})" if field in _FLAG_FIELDS else field


def with_flags(text: str, deployment: str | None) -> str:
    """A plan warning with simulate's flags named where the planner names a field simulate sets by a
    flag (``kvCacheFreeGpuMemFraction`` is the manifest's field with ``--deployment``, which refuses
    the flag)."""
    fraction = (
        f"spec.server.kvCacheFreeGpuMemFraction of --deployment {deployment}"
        if deployment
        else "--kv-cache-free-gpu-mem-fraction"
    )
    text = re.sub(r"\b(raise )kvCacheFreeGpuMemFraction\b", rf"\1{fraction}", text)
    chunked = (  # --deployment refuses --chunked-context: name the manifest's field (trial 38 F6)
        f"spec.server.enableChunkedContext of --deployment {deployment}"
        if deployment
        else "--chunked-context"
    )
    text = re.sub(
        r"enable chunked context \(spec\.server\.enableChunkedContext\) or raise maxNumTokens",
        f"enable chunked context ({chunked}) or raise maxNumTokens (--max-num-tokens)",
        text,
    )
    for pattern, flag in _FIX_FLAGS:
        text = re.sub(pattern, flag, text)
    return text


#: The planner's pointer to its ``recommended`` block, which ``plan`` prints and simulate does not:
#: :func:`does_not_fit` gives the values instead.
_SEE_RECOMMENDED = re.compile(r" \(see recommended[^)]*\)")


def does_not_fit(exc: ReplicaDoesNotFitError, args: argparse.Namespace) -> str:
    """The "does not fit" error with simulate's flags named in the planner's fixes and, in place of
    "see recommended" (``plan``'s output, which simulate does not print), the values to try: the
    smallest ``--tp`` within one node and the smallest larger ``--gpu`` that fit with the other flags
    as given (the planner's search, ``engine_builder.planner.plan``), or that neither does (fresh-user
    trial 41: "raise tensor (or pipeline) parallelism … (see recommended …)" named no flag)."""
    recommended = exc.plan.recommended
    tries = []
    if recommended.get("tensor_parallelism") is not None:
        tries.append(f"--tp {recommended['tensor_parallelism']} (on {exc.plan.gpu_product})")
    if recommended.get("gpu_product") is not None:
        tries.append(f"--gpu {recommended['gpu_product']} (at --tp {args.tp})")
    if tries:
        hint = f"Values to try, each fits on its own with the other flags as given: {' or '.join(tries)}."
    else:
        hint = (
            f"No --tp of one {exc.plan.gpu_product} node and no larger --gpu of the catalog fits with the "
            "other flags as given; follow the fix above."
        )
    text = with_flags(_SEE_RECOMMENDED.sub("", str(exc)), args.deployment)
    per_node = _gpus_per_node(exc.plan.gpu_product)
    if per_node is not None and args.tp * args.pp >= per_node:
        # Fresh-user trial 44 F13: "raise tensor parallelism (--tp)" at --tp 8 of an 8-GPU node, which
        # simulate refuses beyond (fleet.one_node_issue): say what it would take instead.
        beyond = (
            f" beyond one node (not simulated: --tp {args.tp} × --pp {args.pp} is already the {per_node} "
            f"GPUs of one {exc.plan.gpu_product} node; `trtllm-operator plan --multi-node` checks whether "
            "a multi-node engine fits)"
        )
        text = text.replace("raise tensor parallelism (--tp)", f"raise tensor parallelism{beyond}")
        text = text.replace(
            "raise tensor (or pipeline) parallelism (--tp, --pp)",
            f"raise tensor (or pipeline) parallelism{beyond}",
        )
    return f"{text} {hint}"


def _gpus_per_node(product: str) -> int | None:
    """GPUs of one node of ``product`` in the catalog (None when it is not in it)."""
    from engine_builder.planner import PlanInputError, lookup  # noqa: PLC0415

    try:
        return lookup(product).gpus_per_node
    except PlanInputError:
        return None


def argument_errors(args: argparse.Namespace, manifest: dict[str, Any] | None = None) -> list[str]:
    """Problems with the flags (no files read), each naming the flag and the fix; empty = fine.
    ``manifest``: the ``--deployment`` manifest, read, so that a flag it conflicts with names the field
    that is simulated (``spec.replicas`` when its autoscaling is off; fresh-user trial 40 F6)."""
    from trtllm_operator.simulate.policies import autoscaling_off, replicas_said  # noqa: PLC0415

    errors: list[str] = []
    # argparse's float() takes "nan" and "inf", which pass a plain range check (nan < 0 is False).
    for flag, value, positive in (
        ("--slo-ttft-ms", args.slo_ttft_ms, True),
        ("--cold-start-s", args.cold_start_s, False),
        ("--time-scale", args.time_scale, True),
        ("--timeline-interval-s", args.timeline_interval_s, True),
    ):
        bound = "> 0" if positive else ">= 0"
        if not math.isfinite(value):
            errors.append(f"{flag} must be a finite number {bound}, got {value}")
        elif value < 0 or (positive and value == 0):
            errors.append(f"{flag} must be {bound}, got {value}")
    if args.reserve_output_tokens < 0:
        errors.append(f"--reserve-output-tokens must be >= 0, got {args.reserve_output_tokens}")
    if args.deployment:
        # --deployment sets these from the manifest; a flag beside it would be silently overridden.
        static = manifest is not None and autoscaling_off(manifest)
        for flag, value, field in (
            ("--policy", args.policy, "spec.autoscaling (the builtin autoscaler)"),
            ("--min-replicas", args.min_replicas, "spec.autoscaling.minReplicas"),
            ("--max-replicas", args.max_replicas, "spec.autoscaling.maxReplicas"),
            (
                "--kv-cache-free-gpu-mem-fraction",
                args.kv_cache_free_gpu_mem_fraction,
                "spec.server.kvCacheFreeGpuMemFraction",
            ),
            ("--chunked-context", args.chunked_context, "spec.server.enableChunkedContext"),
        ):
            if value is None:
                continue
            if static and field.startswith("spec.autoscaling"):
                # Autoscaling off: static:spec.replicas runs, not the autoscaler (fresh-user trial 40 F6).
                errors.append(
                    f"{flag} cannot be combined with --deployment {args.deployment}, whose autoscaling "
                    f"is off (no spec.autoscaling, or enabled: false): it simulates "
                    f"{replicas_said(manifest or {})} fixed replicas. "
                    f"{_static_fix(manifest or {}, flag, args.deployment)}"
                )
                continue
            errors.append(
                f"{flag} cannot be combined with --deployment {args.deployment}, which takes it "
                f"from {field} (set or not): edit it in the manifest, or drop --deployment to use {flag}"
            )
    low = 1 if args.min_replicas is None else args.min_replicas
    high = DEFAULT_MAX_REPLICAS if args.max_replicas is None else args.max_replicas
    if low < 1:  # trial 38 F7: the message did not say the value it got
        errors.append(
            f"--min-replicas must be >= 1, got {low}: an autoscaler does not scale from 0 (the operator's "
            "minReplicas is at least 1); use --min-replicas 1 or more"
        )
    elif high < low:
        given = (
            f"--max-replicas {high}" if args.max_replicas is not None else f"--max-replicas (default {high})"
        )
        errors.append(f"{given} is below --min-replicas {low}; raise --max-replicas or lower --min-replicas")
    if args.initial_replicas is not None and args.initial_replicas < 0:
        errors.append(f"--initial-replicas must be >= 0, got {args.initial_replicas}")
    for flag, value, field in (  # fresh-user trial 40 F2: 100000 ran for minutes; the API caps them
        ("--min-replicas", args.min_replicas, "spec.autoscaling.minReplicas"),
        ("--max-replicas", args.max_replicas, "spec.autoscaling.maxReplicas"),
        ("--initial-replicas", args.initial_replicas, "spec.replicas"),
    ):
        if value is not None and value > MAX_REPLICAS:
            errors.append(
                f"{flag} {value} is above the API's limit of {MAX_REPLICAS} replicas ({field}); "
                f"use a value ≤ {MAX_REPLICAS}"
            )
    if args.tp < 1 or args.pp < 1:
        errors.append(f"--tp and --pp must be >= 1, got --tp {args.tp} --pp {args.pp}")
    elif args.max_gpus is not None and args.max_gpus < args.tp * args.pp:
        errors.append(
            f"--max-gpus {args.max_gpus} is below the {args.tp * args.pp} GPUs of one replica "
            f"(--tp {args.tp} × --pp {args.pp}); no replica could ever start. "
            "Raise --max-gpus or leave it out."
        )
    for flag, path in (("--timeline", args.timeline), ("--plot", args.plot), ("--decisions", args.decisions)):
        if path:
            parent = Path(path).parent
            if not parent.is_dir():
                errors.append(f"{flag} {path}: directory {str(parent)!r} does not exist; create it first")
    return errors


def _static_fix(manifest: dict[str, Any], flag: str, path: str) -> str:
    """The fix for ``flag`` beside a ``--deployment`` manifest whose autoscaling is off, for what the
    manifest is: one that writes ``spec.replicas`` edits it; one that does not adds it (there is
    nothing to edit); a bare ``spec.autoscaling`` mapping cannot hold it at all, so its ways are
    turning its autoscaling on, a whole manifest, or no ``--deployment`` (a fix said "Edit
    spec.replicas" to all three). Turning autoscaling on names what the API then requires
    (``maxReplicas`` and a target: api.deployment's rules, as ``render`` checks them)."""
    from trtllm_operator.simulate.policies import replicas_written  # noqa: PLC0415

    drop = f"or drop --deployment to use {flag}"
    if replicas_written(manifest):
        return f"Edit spec.replicas (or spec.autoscaling) in the manifest, {drop}"
    fields = ["enabled: true", *(["minReplicas"] if flag == "--min-replicas" else []), "maxReplicas"]
    on = f"{', '.join(fields)} and a target (targets.activeRequestUtilization or targets.kvCacheUtilization)"
    if "spec" in manifest or manifest.get("kind") == DEPLOYMENT_KIND:
        return (
            f"Add spec.replicas to the manifest for another fixed count, set spec.autoscaling's {on} to "
            f"simulate its autoscaler, {drop}"
        )
    return (
        f"{path} is a bare spec.autoscaling mapping, which cannot hold spec.replicas: set its {on} to "
        f"simulate the autoscaler, give a whole LLMDeployment manifest with spec.replicas for another "
        f"fixed count, {drop}"
    )


def capacity_mismatch(policy: Any, kappa: float, deployment: str, replica: Any = None) -> str | None:
    """A note when the manifest's ``spec.autoscaling.capacity.requestsPerSecond`` (the prior κ of
    ``policy``, a :class:`~trtllm_operator.simulate.policies.SharedPolicy`) is off the replica's
    saturated rate by more than the headroom ``capacity.target`` leaves: above κ / target the autoscaler
    plans each replica past what it serves; below κ × target it runs replicas idler than its target.
    Either way until the online correction moves κ, which needs saturated pods (fresh-user trial 44 F22:
    the capacity example's 9.4/s beside a trace whose replica saturates at 5.551/s, and no word).

    The rate compared is the one requestsPerSecond holds for: ``kappa`` (the replica's
    ``saturated_requests_per_second`` at the trace's mean lengths), or, with token weighting
    (``promptTokens`` / ``outputTokens`` set), the performance model's at those lengths for
    ``replica`` (a :class:`~trtllm_operator.simulate.replica.ReplicaSpec`): requestsPerSecond then
    counts requests of those lengths, whatever the trace's are (fresh-user trial 51 Y3: the note
    compared it with the trace's rate). None within that band, or without a prior."""
    params = policy.policy.capacity
    if params is None or params.prior_rps is None or kappa <= 0:
        return None
    rate = f"saturated_requests_per_second {kappa:g} for this trace (the performance model's, at its mean "
    rate += "prompt and output lengths)"
    if params.prior_tokens is not None and replica is not None:
        from trtllm_operator.simulate.policies import capacity_rps_at  # noqa: PLC0415
        from trtllm_operator.simulate.traces import Request  # noqa: PLC0415

        prompt, output = (round(t) for t in params.prior_tokens)
        lengths = f"promptTokens {prompt} and outputTokens {output}"
        longest = replica.max_seq_len
        if not replica.accepts(Request(0.0, prompt, output)) or (longest and prompt + output > longest):
            # trial 52 #3: a rate for a request the engine never serves is no advice; trial 53 #7: nor for
            # one whose output the server cuts at maxSeqLen - prompt (UPSTREAM_MAX_NEW_TOKENS)
            return (
                f"spec.autoscaling.capacity {lengths} of --deployment {deployment}: this replica does not "
                f"serve a request of these lengths (a prompt over its maximum input length, "
                f"{longest - 1 if longest else 'maxSeqLen - 1'} tokens, prompt + output over its maxSeqLen "
                f"{longest or '(derived)'}, whose outputs the server cuts, or a reservation over its whole "
                "KV cache), so requestsPerSecond cannot have been measured at "
                "them. Fix: set promptTokens and outputTokens to the mean lengths of the traffic "
                "requestsPerSecond was measured with (simulate prints this trace's as "
                "replica.mean_prompt_tokens and mean_output_tokens)"
            )
        # the performance model needs ≥ 1 token of each; the rate is compared unrounded (trial 52 #2:
        # a rate under 0.0005/s rounded to 0 and divided by zero)
        kappa = capacity_rps_at(replica, max(1, prompt), max(1, output))
        rate = (
            f"saturated rate {kappa:.4g} requests/s at {lengths}, the lengths it holds for with token "
            "weighting (the performance model's)"
        )
        if kappa <= 0:
            return None
    prior, target = params.prior_rps, params.target
    if kappa * target <= prior <= kappa / target:
        return None
    above = prior > kappa
    off = abs(prior / kappa - 1) * 100
    if above:
        effect = (
            f"at capacity.target {target:g} the autoscaler plans {prior * target:.3g} requests/s per "
            "replica, more than one serves"
        )
    else:
        effect = f"the autoscaler runs replicas well below capacity.target {target:g} (more than needed)"
    fix = "for this traffic" if params.prior_tokens is None else "at those lengths"
    return (
        f"spec.autoscaling.capacity.requestsPerSecond {prior:g} of --deployment {deployment} is "
        f"{off:.0f}% {'above' if above else 'below'} the replica's {rate}: {effect}, until the online "
        f"correction, which needs saturated pods, moves it. Fix: set requestsPerSecond near {kappa:.4g} "
        f"{fix}, or measure it (docs/autoscaling.md)"
    )


def _deployment_fix(message: str, args: argparse.Namespace, server: ServerSpec) -> str:
    """``message`` (a manifest simulate cannot run) with the fix that works: drop ``--deployment`` and
    pass ``--policy`` with the flags that carry the manifest's server settings (``--deployment``
    refuses them beside it; fresh-user trial 38 F6)."""
    flags = [f"--kv-cache-free-gpu-mem-fraction {server.kv_cache_free_gpu_mem_fraction:g}"]
    if server.enable_chunked_context:
        flags.append("--chunked-context")
    return (
        f"{message}. Or simulate another policy with this replica: drop --deployment {args.deployment} "
        f"and pass --policy POLICY {' '.join(flags)} (the manifest's spec.server settings)"
    )


def _max_seq_len_fix(longest: int) -> str:
    """The ``--max-seq-len`` that admits a prompt of ``longest`` tokens (maxSeqLen − 1 ≥ it), or, when
    that is above the API's limit (``BUILD_LIMITS``, the LLMEngine schema's maximum of
    ``spec.build.maxSeqLen``), that no engine serves it (fresh-user trial 43 F3: the note asked for
    ``--max-seq-len ≥ 1000000001``, which the flag refuses)."""
    field, _, high = BUILD_LIMITS["max_seq_len"]
    if longest + 1 <= high:
        return f"--max-seq-len ≥ {longest + 1}"
    return (
        f"shorter prompts: {longest:,} tokens is above what any engine serves ({field} is at most "
        f"{high:,}, the API's limit; --max-seq-len {high:,} admits prompts up to {high - 1:,} tokens)"
    )


def _max_num_tokens_fix(longest: int, chunking: str) -> str:
    """Chunked context, or the ``--max-num-tokens`` that admits a prompt of ``longest`` tokens without
    it when that is within the API's limit (``BUILD_LIMITS``: ``spec.build.maxNumTokens``)."""
    field, _, high = BUILD_LIMITS["max_num_tokens"]
    if longest <= high:
        return f"{chunking} or --max-num-tokens ≥ {longest}"
    return f"{chunking} (--max-num-tokens cannot reach {longest:,}: {field} is at most {high:,})"


def _format(value: Any) -> str:
    """A table cell: a mapping as ``key=value, …`` (thousands separated), anything else as str."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={_format(v)}" for k, v in value.items())
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def run(args: argparse.Namespace) -> int:
    """Run one simulation and print its summary (JSON or a table)."""
    from engine_builder.planner import PlanInputError, moot_with_chunked_context  # noqa: PLC0415
    from trtllm_operator.simulate import policies, report  # noqa: PLC0415
    from trtllm_operator.simulate.engine import Simulation  # noqa: PLC0415
    from trtllm_operator.simulate.fleet import (  # noqa: PLC0415
        ReplicaDoesNotFitError,
        ReplicaInputError,
        replica_setup,
    )
    from trtllm_operator.simulate.traces import (  # noqa: PLC0415
        TraceError,
        load_trace,
        span_error,
        time_scale,
    )

    manifest: dict[str, Any] | None = None
    engine: dict[str, Any] | None = None
    if args.deployment:  # read first, so that a flag it conflicts with names the field simulated
        try:
            manifest, engine = _load_manifest(args.deployment)
        except ValueError as exc:
            return _fail(str(exc))
        except OSError as exc:  # the message names the flag, as every other --deployment error does
            return _fail(f"--deployment {args.deployment}: {exc.strerror or exc}")
    for level, message in engine_flags(args, engine):
        say("simulate", level, message)
    manifest_policy: policies.SharedPolicy | policies.StaticPolicy | None = None
    if manifest is not None:
        # Before the flags' checks and the replica's plan: a manifest simulate cannot run at all
        # (mode hpa/keda, spec.replicas 0 with autoscaling off) is the refusal to give first. After a
        # flag's "cannot be combined", whose fix is to edit the manifest, it came as a second refusal
        # (fresh-user trial 41; trial 38 F6 for the plan).
        try:
            manifest_policy = policies.deployment_policy(manifest)
        except ValueError as exc:
            return _fail(_deployment_fix(str(exc), args, _server_spec(manifest)))
    errors = argument_errors(args, manifest)
    if errors:
        for message in errors[1:]:
            say("simulate", "error", message)
        return _fail(errors[0])
    try:
        requests = time_scale(load_trace(args.trace, seed=args.seed), args.time_scale)
    except (TraceError, OSError) as exc:
        return _fail(str(exc))
    too_long = span_error(args.trace, requests, args.time_scale)
    if too_long:  # fresh-user trial 43 F1: 10^12 simulated seconds did not end
        return _fail(too_long)
    server = _server_spec(manifest)
    fraction = args.kv_cache_free_gpu_mem_fraction
    if fraction is None:
        fraction = server.kv_cache_free_gpu_mem_fraction
    chunked = server.enable_chunked_context if args.chunked_context is None else args.chunked_context
    if args.timeline or args.plot:  # the run lasts at least until the last arrival: refuse before it
        try:
            report.check_timeline_rows(max(r.arrival_s for r in requests), args.timeline_interval_s)
        except report.TimelineTooLongError as exc:
            return _fail(f"--timeline-interval-s {args.timeline_interval_s:g}: {exc}")
    try:
        setup = replica_setup(
            args.model_config,
            args.gpu,
            quantization=args.quantization,
            kv_cache_dtype=args.kv_cache_dtype,
            tp=args.tp,
            pp=args.pp,
            max_batch_size=args.max_batch_size,
            max_num_tokens=args.max_num_tokens,
            kv_cache_free_gpu_mem_fraction=fraction,
            chunked_context=chunked,
            max_seq_len=args.max_seq_len,
            # the planner derives maxSeqLen above it and judges maxNumTokens against it, as for the
            # operator (fresh-user trial 52 #8: the 8B example, maxInputLen 8,192 = maxNumTokens, was
            # warned of prompts up to maxSeqLen 16,384); the runtime does not read it (docs/simulator.md).
            # Not with a --max-seq-len at or below it, which the planner would refuse beside it.
            max_input_len=_max_input_len_below(engine_max_input_len(engine), args.max_seq_len),
            max_tokens_in_paged_kv_cache=server.max_tokens_in_paged_kv_cache,
            backend=engine_backend(engine),
            paged_context_fmha=engine_paged_context_fmha(engine),
        )
    except PlanInputError as exc:
        return _fail(with_flags(f"{flag_of(exc.field, args.deployment)}: {exc.message}", args.deployment))
    except ReplicaInputError as exc:  # a bad flag value, not a model that does not fit (trial 37b F7)
        lines = (f"{flag_of(i.field, args.deployment)}: {i.message} Fix: {i.fix}" for i in exc.issues)
        return _fail("\n".join(with_flags(line, args.deployment) for line in lines))
    except ReplicaDoesNotFitError as exc:
        return _fail(does_not_fit(exc, args))
    except (ValueError, OSError) as exc:
        return _fail(with_flags(str(exc), args.deployment))
    for warning in setup.plan.warnings:  # e.g. a KV cache so small that maxSeqLen shrank (plan's own)
        if chunked and moot_with_chunked_context(warning):
            continue  # chunked context is on: those prompts are served in chunks (trial 37b F2)
        say("simulate", "warning", with_flags(str(warning), args.deployment))
    if setup.spec.max_kv_tokens < setup.plan.max_kv_tokens:  # fresh-user trial 44 F27: it was ignored
        say(
            "simulate",
            "note",
            f"spec.server.maxTokensInPagedKvCache of --deployment {args.deployment} bounds the replica's KV "
            f"cache to {setup.spec.max_kv_tokens:,} tokens (the free-memory fraction's pool is "
            f"{setup.plan.max_kv_tokens:,}; TensorRT-LLM takes the smaller)",
        )
    unsimulated = _unsimulated(server)
    if unsimulated:
        say(
            "simulate",
            "note",
            f"--deployment {args.deployment}: {'; '.join(unsimulated)} (docs/simulator.md, Limits)",
        )
    if args.reserve_output_tokens:
        spec = dataclasses.replace(setup.spec, reserve_output_tokens=args.reserve_output_tokens)
        setup = dataclasses.replace(setup, spec=spec)
    frontend = replica_frontend(engine, server)
    if frontend != setup.spec.frontend:  # trtllm-serve: its own families, none of Triton's
        setup = dataclasses.replace(setup, spec=dataclasses.replace(setup.spec, frontend=frontend))
    # Outputs as TensorRT-LLM generates them, for the policies (the oracle's plan, κ) and the run alike; the
    # policies count only the requests the replica accepts (policies.accepted: ReplicaSpec.accepts).
    served = [setup.spec.served(r) for r in requests]
    capped = sum(
        1 for asked, got in zip(requests, served, strict=True) if asked is not got and setup.spec.accepts(got)
    )
    if capped:
        say(
            "simulate",
            "note",
            f"{capped} request(s) ask for more output than maxSeqLen "
            f"{setup.spec.max_seq_len} minus their prompt: TensorRT-LLM generates and reserves at most "
            "that many tokens (LlmRequest::validate), and so does the simulation",
        )
    rejected = [r for r in served if not setup.spec.accepts(r)]
    if rejected:  # fresh-user trial 38 F1: they were dropped with no word
        longest = max(r.input_tokens for r in rejected)
        bounds = [f"maxSeqLen {setup.spec.max_seq_len} − 1"] if setup.spec.max_seq_len is not None else []
        fixes = []
        if setup.spec.max_seq_len is not None and longest > setup.spec.max_seq_len - 1:
            fixes.append(_max_seq_len_fix(longest))
        if not setup.spec.chunked_context:
            bounds.append(f"maxNumTokens {setup.spec.max_num_tokens} (no chunked context)")
            chunking = (  # --deployment refuses --chunked-context (trial 38 F6)
                f"spec.server.enableChunkedContext of --deployment {args.deployment}"
                if args.deployment
                else "--chunked-context"
            )
            if longest > setup.spec.max_num_tokens:
                fixes.append(_max_num_tokens_fix(longest, chunking))
        # Only the prompt bounds can reject here: the planner refuses a KV cache smaller than one
        # sequence of maxSeqLen (engine_builder.planner.plan; TensorRT-LLM would cut maxSeqLen to it), and a
        # reservation is at most maxSeqLen (ReplicaSpec.reservation), so ReplicaSpec.accepts' "whole KV
        # cache" case is out of a planned replica's reach (fresh-user trial 40 F10).
        say(
            "simulate",
            "note",
            f"{len(rejected)} request(s) are rejected by the server and "
            f"count as dropped: a prompt over {' or '.join(bounds)} (TensorRT-LLM's maximum input length; "
            f"the longest here: {longest} tokens). Fix: {', and '.join(fixes)}, if the engine allows it",
        )
    requests = served
    try:
        policy: (
            policies.SharedPolicy
            | policies.QueueComputeHPA
            | policies.SaturationAnalyzer
            | policies.StaticPolicy
            | policies.OraclePolicy
        )
        if manifest_policy is not None:
            policy = manifest_policy
            why = ""
            if isinstance(policy, policies.StaticPolicy):
                # The default named as such for a manifest that does not write spec.replicas (trial 41).
                written = policies.replicas_written(manifest or {})
                said = "spec.replicas" if written else policies.replicas_said(manifest or {})
                why = f": {said}, autoscaling off"
            args.policy = f"{policy.name} ({args.deployment}{why})"
        else:
            args.policy = args.policy or "builtin"
            policy = policies.parse_policy(
                args.policy,
                requests,
                setup.spec,
                min_replicas=1 if args.min_replicas is None else args.min_replicas,
                max_replicas=DEFAULT_MAX_REPLICAS if args.max_replicas is None else args.max_replicas,
                cold_start_s=args.cold_start_s,
            )
    except (ValueError, OSError) as exc:
        return _fail(str(exc))
    if isinstance(policy, policies.StaticPolicy) and policy.replicas > MAX_REPLICAS:
        return _fail(
            f"--policy {policy.name}: above the API's limit of {MAX_REPLICAS} replicas (spec.replicas); "
            f"use static:N with N ≤ {MAX_REPLICAS}"
        )
    if args.initial_replicas == 0 and not isinstance(policy, policies.StaticPolicy | policies.OraclePolicy):
        # An autoscaler at 0 replicas has no pod to measure and does not scale (Kubernetes' HPA:
        # ScalingDisabled, decide/autoscaler.py SCALING_DISABLED); the run would serve nothing.
        return _fail(
            f"--initial-replicas 0 with --policy {args.policy}: an autoscaler does not scale up from "
            "0 replicas (HPA's ScalingDisabled; the operator's minReplicas is at least 1), so no "
            "request would be served. Give --initial-replicas 1 or more, or --policy oracle or static:N"
        )
    if args.decisions and not isinstance(policy, policies.SharedPolicy):
        return _fail(
            f"--decisions with --policy {args.policy}: only the operator's policy (builtin, capacity, "
            "capacity-learned, kv-only, --deployment) explains its decisions; the baselines, static:N "
            "and the oracle have none to write"
        )
    if isinstance(policy, policies.StaticPolicy):
        initial = policy.replicas
    elif args.initial_replicas is not None:
        initial = args.initial_replicas
    elif isinstance(policy, policies.OraclePolicy):
        initial = policy.ready_at_start()
    else:
        initial = policies.starting_replicas(requests, setup.spec)
        if isinstance(policy, policies.SharedPolicy):
            low, high = policy.policy.min_replicas, policy.policy.max_replicas
        else:
            low, high = policy.min_replicas, policy.max_replicas
        initial = min(max(initial, low), high)
    sim = Simulation(
        requests,
        setup.spec,
        policy,
        initial_replicas=initial,
        cold_start_s=args.cold_start_s,
        max_gpus=args.max_gpus,
        routing=args.routing,
        seed=args.seed,
    )
    result = sim.run()
    summary = report.summarize(result, args.slo_ttft_ms)
    summary["policy"] = args.policy
    summary["cold_start_s"] = args.cold_start_s
    try:  # κ of the requests the replica accepts (trial 38 F2); none accepted: no κ (null)
        kappa: float | None = round(policies.profiled_capacity_rps(requests, setup.spec), 3)
    except ValueError:
        kappa = None
    try:  # the token weighting that goes with κ: spec.autoscaling.capacity's three token fields
        weight, (prompt, output) = policies.profiled_tokens(requests, setup.spec)
        tokens: dict[str, float | None] = {
            "output_token_weight": round(weight, 3),
            "mean_prompt_tokens": prompt,
            "mean_output_tokens": output,
        }
    except ValueError:
        tokens = dict.fromkeys(("output_token_weight", "mean_prompt_tokens", "mean_output_tokens"))
    if isinstance(manifest_policy, policies.SharedPolicy) and kappa is not None:
        mismatch = capacity_mismatch(manifest_policy, kappa, args.deployment, setup.spec)
        if mismatch:
            say("simulate", "note", mismatch)
    summary["replica"] = {
        "gpus": setup.spec.gpus,
        "max_kv_tokens": setup.spec.max_kv_tokens,
        "max_batch_size": setup.spec.max_batch_size,
        "max_num_tokens": setup.spec.max_num_tokens,
        "max_seq_len": setup.spec.max_seq_len,
        # the performance model's κ for this trace's mean lengths: a first value for
        # spec.autoscaling.capacity.requestsPerSecond (docs/autoscaling.md)
        "saturated_requests_per_second": kappa,
        # ... at these mean lengths, and what an output token costs in prompt tokens there:
        # spec.autoscaling.capacity.promptTokens / outputTokens / outputTokenWeight
        **tokens,
        "chunked_context": setup.spec.chunked_context,
    }
    rows = None
    if args.timeline or args.plot:
        try:
            rows = report.timeline(result, args.slo_ttft_ms, args.timeline_interval_s)
        except report.TimelineTooLongError as exc:  # the run drained past the last arrival
            return _fail(f"--timeline-interval-s {args.timeline_interval_s:g}: {exc}")
    if args.timeline and rows is not None:
        try:
            report.write_timeline_csv(rows, args.timeline)
        except OSError as exc:
            return _fail(f"--timeline {args.timeline}: cannot write: {exc}")
    if args.decisions and isinstance(policy, policies.SharedPolicy):
        try:
            report.write_decisions_csv(policy.decisions, args.decisions)
        except OSError as exc:
            return _fail(f"--decisions {args.decisions}: cannot write: {exc}")
    if args.plot and rows is not None:
        try:
            report.plot_runs({args.policy: rows}, args.plot, slo_ttft_ms=args.slo_ttft_ms, title=args.policy)
        except ImportError:
            return _fail("--plot needs matplotlib: pip install 'trtllm-operator[sim]'")
    if args.output == "json":
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        width = max(len(k) for k in summary)
        for key, value in summary.items():
            print(f"{key:<{width}}  {_format(value)}")
    return EXIT_OK
