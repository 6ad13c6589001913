"""``trtllm-operator plan``: does this model fit on this GPU, with how much KV cache.

A thin shell over :mod:`engine_builder.planner` (the same code the builder's ``plan`` stage runs).
Exit codes: 0 fits, 3 does not fit (the JSON/table says why and what would), 2 bad input (a
``config.json`` field, an unknown GPU, or a rule such as TP not dividing the heads; the message
names the field and the flag to change).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from engine_builder.planner import (
    Architecture,
    PlanInputError,
    PlanRequest,
    backend_model_error,
    load_catalog_extension,
    load_hf_config,
    lookup,
    plan,
)
from engine_builder.planner.catalog import EXTENSION_FIELD
from trtllm_operator.commands import (
    EXIT_BAD_INPUT,
    add_replica_arguments,
    build_integer,
    integer,
    number,
    plain,
    say,
)

EXIT_FITS = 0
EXIT_DOES_NOT_FIT = 3

#: API field path → the flag of this command, so errors name what the user typed (``simulate``'s flags
#: of the same fields have the same names).
FIELD_FLAGS: dict[str, str] = {
    "spec.quantization.format": "--quantization",
    "spec.quantization.kvCacheDtype": "--kv-cache-dtype",
    "spec.quantization.awqBlockSize": "--awq-block-size",
    "spec.parallelism.tensor": "--tp",
    "spec.parallelism.pipeline": "--pp",
    "spec.parallelism.expert": "--ep",
    "spec.parallelism": "--tp/--pp, or --multi-node",
    "spec.gpu.product": "--gpu",
    "spec.backend": "--backend",
    "spec.build.maxSeqLen": "--max-seq-len",
    "spec.build.maxBatchSize": "--max-batch-size",
    "spec.build.maxNumTokens": "--max-num-tokens",
    "spec.build.maxBeamWidth": "--max-beam-width",
    "spec.build.maxInputLen": "--max-input-len",
    "spec.server.kvCacheFreeGpuMemFraction": "--kv-cache-free-gpu-mem-fraction",
    "typicalRequestTokens": "--typical-request-tokens",
    "gpusPerNode": "--gpus-per-node",
    "tokensPerBlock": "--tokens-per-block",
    EXTENSION_FIELD: "--gpu-catalog",
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "plan",
        help="capacity plan: does a model fit, how many KV-cache tokens (exit 0 fits, 3 not, 2 bad input)",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_replica_arguments(p)
    p.add_argument("--ep", type=integer("an integer ≥ 1"), default=1, help="expert parallelism (MoE)")
    p.add_argument(
        "--max-beam-width",
        type=build_integer("max_beam_width"),
        default=1,
        help="beam width (spec.build.maxBeamWidth; default 1)",
    )
    p.add_argument(
        "--max-input-len",
        type=build_integer("max_input_len"),
        default=None,
        help="longest prompt (spec.build.maxInputLen); with --max-seq-len unset the derived maxSeqLen is "
        "above it (docs/planner.md)",
    )
    p.add_argument(
        "--kv-cache-free-gpu-mem-fraction",
        type=number("a fraction in (0, 1], e.g. 0.9"),
        default=0.9,
        help="share of the GPU memory left after the weights that the KV cache takes (default 0.9)",
    )
    p.add_argument(
        "--typical-request-tokens",
        type=integer("an integer ≥ 1"),
        default=None,
        help="prompt + output tokens of a typical request",
    )
    p.add_argument(
        "--awq-block-size",
        type=integer("64 or 128"),
        default=128,
        help="AWQ group size (spec.quantization.awqBlockSize; default 128)",
    )
    p.add_argument(
        "--tokens-per-block",
        type=integer("a power of two ≤ 1024, e.g. 32"),
        default=32,
        help="tokens per KV-cache block (default 32)",
    )
    p.add_argument(
        "--gpus-per-node",
        type=integer("an integer ≥ 1"),
        default=None,
        help="GPUs in one node (default: the GPU catalog entry's gpusPerNode, 8 for HGX boards, 4 for GB200)",
    )
    p.add_argument(
        "--backend",
        choices=("tensorrt", "pytorch"),
        default="tensorrt",
        help="spec.backend: tensorrt (default, as the API's) or pytorch; some models and formats "
        "are refused on one of them",
    )
    p.add_argument("--multi-node", action="store_true", help="allow tp × pp beyond one node")
    p.add_argument("--gpu-catalog", default=None, help="YAML file extending the GPU catalog")
    p.add_argument("--output", choices=("json", "table"), default="json", help="json (default) or table")
    p.set_defaults(func=run)


def _flag(field: str) -> str:
    flag = FIELD_FLAGS.get(field)
    return f"{field} ({flag})" if flag else field


#: The planner's wording (engine_builder.planner.plan) → this command's flag, where the planner names
#: a field that plan sets by a flag in the fix (fresh-user trial 40 F9: the one-node fix said
#: "set spec.parallelism.multiNode: true" to a user of ``plan``, whose switch is ``--multi-node``).
_FIX_FLAGS: tuple[tuple[str, str], ...] = (
    ("set spec.parallelism.multiNode: true", "pass --multi-node"),
    ("lower tensor or pipeline parallelism", "lower tensor or pipeline parallelism (--tp, --pp)"),
    ("Set backend: pytorch", "Pass --backend pytorch"),
    # plan has no flag for spec.build.pagedContextFMHA: it plans the API's default, true (trial 51 Y6)
    (
        "set build.pagedContextFMHA: false",
        "set build.pagedContextFMHA: false in the LLMEngine (plan has no flag for it and assumes the "
        "default, true)",
    ),
)


def _with_flags(text: str) -> str:
    for wording, flag in _FIX_FLAGS:
        text = text.replace(wording, flag)
    return text


def run(args: argparse.Namespace) -> int:
    try:
        extra = None
        if args.gpu_catalog:
            try:
                text = Path(args.gpu_catalog).read_text(encoding="utf-8")
            except OSError as exc:
                raise PlanInputError(
                    EXTENSION_FIELD, f"cannot read {args.gpu_catalog}: {exc} (--gpu-catalog)"
                ) from exc
            try:
                extra = load_catalog_extension(text)
            except PlanInputError as exc:
                where = "" if exc.field == EXTENSION_FIELD else f"{exc.field}: "
                raise PlanInputError(EXTENSION_FIELD, f"{args.gpu_catalog}: {where}{exc.message}") from exc
        arch = Architecture.from_hf_config(load_hf_config(args.model_config))
        unbuildable = backend_model_error(arch.model_type, args.backend)
        if unbuildable is not None:
            raise unbuildable
        gpu = lookup(args.gpu, extra)
        request = PlanRequest(
            quantization=args.quantization,
            kv_cache_dtype=args.kv_cache_dtype,
            tp=args.tp,
            pp=args.pp,
            ep=args.ep,
            max_seq_len=args.max_seq_len,
            max_batch_size=args.max_batch_size,
            max_num_tokens=args.max_num_tokens,
            kv_cache_free_gpu_mem_fraction=args.kv_cache_free_gpu_mem_fraction,
            typical_request_tokens=args.typical_request_tokens,
            multi_node=args.multi_node,
            gpus_per_node=args.gpus_per_node if args.gpus_per_node is not None else gpu.gpus_per_node,
            awq_block_size=args.awq_block_size,
            tokens_per_block=args.tokens_per_block,
            max_beam_width=args.max_beam_width,
            max_input_len=args.max_input_len,
            backend=args.backend,
        )
        result = plan(arch, request, gpu, extra)
    except PlanInputError as exc:
        say("plan", "error", f"{_flag(exc.field)}: {_with_flags(exc.message)}")
        return EXIT_BAD_INPUT

    # Rule violations (validate) are bad input; memory shortfalls are "does not fit".
    invalid = [r for r in result.reasons if r.kind == "invalid"]
    if args.output == "json":
        print(json.dumps(result.to_json_dict(), indent=2, sort_keys=False))
    else:
        print(_table(result.to_json_dict()))
    for r in result.reasons:
        kind = "error" if r in invalid else "does not fit"
        say("plan", kind, _with_flags(f"{_flag(r.field)}: {r.message} Fix: {r.fix}"))
    if invalid:
        return EXIT_BAD_INPUT
    return EXIT_FITS if result.fits else EXIT_DOES_NOT_FIT


def _table(data: dict[str, Any]) -> str:
    rows: list[tuple[str, str]] = []
    for key, value in data.items():
        if key in ("reasons", "recommended", "warnings"):
            continue
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and key.endswith(("bytes_per_gpu", "_bytes"))
        ):
            shown = f"{value:,} ({value / 1024**3:.2f} GiB)"
        elif isinstance(value, int) and not isinstance(value, bool):
            shown = f"{value:,}"
        elif value is None:
            shown = "-"  # JSON null: not applicable (e.g. no derived-limit rule for an explicit maxSeqLen)
        else:
            shown = str(value)
        rows.append((key, shown))
    recommended = data["recommended"]
    # When the model does not fit, tensor_parallelism (this GPU) and gpu_product (the requested
    # parallelism) are two alternatives, each of which fits alone; said so, so that they are not
    # read as one recommendation (a trial read "TP 2 on an H200").
    alternatives = [k for k in ("tensor_parallelism", "gpu_product") if recommended.get(k) is not None]
    for key, value in recommended.items():
        shown = "-" if value is None else str(value)
        if key == "max_seq_len" and value is None and alternatives:  # trial 44 F1
            shown += " (each alternative derives its own: plan again with it)"
        if key in alternatives:
            n = f"alternative {alternatives.index(key) + 1} of {len(alternatives)}"
            if key == "tensor_parallelism":
                shown += f" ({n}: tensor parallelism {value} on {data['gpu_product']})"
            else:
                shown += f" ({n}: that GPU at the requested tensor parallelism {data['tp']})"
        rows.append((f"recommended.{key}", shown))
    for i, item in enumerate(data["reasons"]):
        rows.append((f"reasons[{i}]", _with_flags(f"{item['field']}: {item['message']} Fix: {item['fix']}")))
    for i, item in enumerate(data["warnings"]):
        fix = f" Fix: {item['fix']}" if item.get("fix") else ""
        rows.append((f"warnings[{i}]", f"{item['field']}: {item['message']}{fix}"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
