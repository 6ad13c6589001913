"""CPU stand-in for the TensorRT-LLM engine: the builder's checkpoint, run with PyTorch on the CPU.

This is NOT the TensorRT-LLM engine and NOT a product component. It exists so that tests and
``make demo`` can put a real Triton Inference Server (2.51, from ``nvidia-pytriton``) in front of
the artifact the engine-builder actually produced, on machines without a GPU. Only the
Triton-facing behaviour follows upstream (tensors, streaming, admission, KV-block accounting,
metrics); the numerics are a plain fp32 Llama forward pass over dequantized weights.

What it reads (the artifact layout of ``engine_builder.package``):

* a TensorRT-LLM checkpoint (``config.json`` + ``rank{N}.safetensors``, tensor names of
  TensorRT-LLM's Llama: ``transformer.layers.{l}.attention.qkv`` …) — the tensorrt backend's
  input to ``trtllm-build``; every rank's shard is dequantized and the tensor-parallel shards are
  merged (column-parallel ``qkv``/``fc``/``gate``/``vocab_embedding``/``lm_head`` on the output
  dimension, row-parallel ``dense``/``proj`` on the input dimension; pipeline ranks hold
  consecutive layers);
* a unified Hugging Face checkpoint (``config.json`` with ModelOpt's ``quantization_config``,
  ``model*.safetensors``) — the PyTorch backend's checkpoint.

Dequantization follows the exporter that wrote the files, NVIDIA ModelOpt 0.47.0
(``modelopt/torch/export/quant_utils.py``):

* FP8 (``quant_algo`` FP8): ``w = fp8 · weights_scaling_factor`` (per tensor, ``to_quantized_weight``
  divides by it); activations are quantized per tensor to e4m3 with ``activation_scaling_factor``
  (``get_activation_scaling_factor`` = amax / 448) as the FP8 GEMM does;
* INT8 SmoothQuant (``W8A8_SQ_PER_CHANNEL``): ``w = int8 · weights_scaling_factor[out]``
  (``from_quantized_weight``); the input is multiplied by ``prequant_scaling_factor`` (the smoothing
  factor) and quantized per tensor to int8 with ``activation_scaling_factor`` (amax / 127);
* INT4 AWQ (``W4A16_AWQ``) and W4A8 AWQ: ``pack_int4_in_uint8`` stores two signed int4 values per
  byte along the output dimension (even row in the low nibble), shape ``[out/2, in]``;
  ``w = int4 · weights_scaling_factor[out, in // group_size]``; the input is multiplied by
  ``prequant_scaling_factor`` (AWQ's per-channel scale); W4A8 additionally quantizes activations
  to FP8 (``activation_scaling_factor``);
* NVFP4 is refused with a clear error: ModelOpt cannot produce an NVFP4 checkpoint on a CPU
  (``engine-builder`` fails ``RequiresGPU``), so no NVFP4 artifact exists here to serve or verify.
* KV cache FP8 / INT8 (``kv_cache_quant_algo``): keys and values are quantized with the per-layer
  ``kv_cache_scaling_factor`` (TensorRT-LLM checkpoint) or ``k_scale`` / ``v_scale`` (unified
  checkpoint) when written to the cache, as the engine stores them.

The paged KV-cache pool (:class:`BlockPool`) and the scheduler (:class:`Executor`) follow the
TensorRT-LLM executor's accounting, which the Triton backend reports (tensorrtllm_backend v0.19.0,
commit c1e19638, ``inflight_batcher_llm/src/model_instance_state.cc`` ``WaitForStats``):

* ``max`` = ``maxNumActiveRequests`` = the model's ``getMaxNumSequences()`` (TensorRT-LLM
  ``cpp/tensorrt_llm/executor/executorImpl.cpp``: ``mMaxNumActiveRequests =
  mModel->getMaxNumSequences()``), which is the engine's ``max_batch_size`` × the number of micro
  batches (``trtGptModelInflightBatching.cpp``: the pipeline-parallel size, else 1 without TRT
  overlap);
* ``active`` = requests the executor has admitted (never more than ``max``; the rest wait in the
  executor's queue, which the Triton backend does not export);
* ``scheduled`` = requests in this iteration's batch; ``context`` = those in their context phase;
  ``waiting`` = ``active − scheduled`` (``model_instance_state.cc``: ``numActiveRequests −
  numScheduledRequests``);
* KV blocks: ``max``, ``free``, ``used``, ``tokens_per``, ``reused`` (0: the stand-in does no prefix
  reuse) and ``fraction`` = used / max (0 when max is 0), as ``model_instance_state.cc`` computes it.

Capacity scheduling is ``GUARANTEED_NO_EVICT`` (the rendered default, TensorRT-LLM
``batch_manager/capacityScheduler.cpp``): a request joins the batch only when the blocks for its
whole length (prompt + ``request_output_len``) can be reserved; ``MAX_UTILIZATION`` admits on the
blocks of the current step and the stand-in then pauses (evicts) the newest request when the pool
runs out.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from safetensors import safe_open

#: Says what this is wherever it identifies itself (log line, metric HELP text, server log).
STANDIN_DESCRIPTION = (
    "CPU stand-in for the TensorRT-LLM engine (trtllm-operator hack/tritoncpu): NOT the GPU engine; "
    "runs the builder's checkpoint with PyTorch on the CPU for tests and make demo"
)

FP8_MAX = 448.0  # e4m3 finite maximum (ModelOpt: maxbound of an (4, 3) quantizer)


class StandInError(RuntimeError):
    """The artifact cannot be served by the stand-in; the message names the file and the reason."""


# --------------------------------------------------------------------------------------- weights
@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    quant_algo: str | None
    kv_cache_quant_algo: str | None
    tp_size: int = 1
    pp_size: int = 1
    logits_dtype: str = "float32"


@dataclass
class Linear:
    """``y = quant_act(x · pre_quant_scale) @ weightᵀ``, weight dequantized to fp32 ``[out, in]``."""

    weight: torch.Tensor
    pre_quant_scale: torch.Tensor | None = None
    act_quant: tuple[str, float] | None = None  # ("fp8" | "int8", per-tensor scale)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_quant_scale is not None:
            x = x * self.pre_quant_scale
        if self.act_quant is not None:
            x = fake_quant(x, *self.act_quant)
        return x @ self.weight.T


@dataclass
class Layer:
    input_norm: torch.Tensor
    q: Linear
    k: Linear
    v: Linear
    o: Linear
    post_norm: torch.Tensor
    gate: Linear  # gate_proj (activation side)
    up: Linear
    down: Linear
    kv_scales: tuple[float, float] | None = None  # (k, v) cache scale when the KV cache is quantized


@dataclass
class Weights:
    config: ModelConfig
    embed: torch.Tensor
    layers: list[Layer]
    norm: torch.Tensor
    lm_head: torch.Tensor
    source: str = ""


def fake_quant(x: torch.Tensor, kind: str, scale: float) -> torch.Tensor:
    """Quantize-dequantize ``x`` per tensor: ``fp8`` (e4m3, saturating) or ``int8`` (round, clamp)."""
    if kind == "fp8":
        return (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).to(torch.float32) * scale
    if kind == "int8":
        return (x / scale).round().clamp(-128, 127) * scale
    raise StandInError(f"unknown activation quantization {kind!r}")


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of ModelOpt 0.47 ``pack_int4_in_uint8``: ``[out/2, in]`` bytes → ``[out, in]`` int4 values
    (signed, −8…7; row ``2j`` in the low nibble of byte row ``j``, row ``2j+1`` in the high one)."""
    b = packed.view(torch.uint8).to(torch.int16)
    low = b & 0x0F
    high = (b >> 4) & 0x0F
    low = torch.where(low >= 8, low - 16, low)
    high = torch.where(high >= 8, high - 16, high)
    half, cols = b.shape
    out = torch.empty((half * 2, cols), dtype=torch.float32)
    out[0::2] = low.float()
    out[1::2] = high.float()
    return out


def _scalar(t: torch.Tensor | None) -> float | None:
    return None if t is None else float(t.float().reshape(-1).max())


class _Tensors:
    """Tensors of one safetensors shard set, by name, read lazily."""

    def __init__(self, files: list[str]) -> None:
        self.where: dict[str, str] = {}
        self._handles: dict[str, Any] = {}
        for f in files:
            handle = safe_open(f, "pt")
            self._handles[f] = handle
            for k in handle.keys():  # noqa: SIM118 - safe_open has keys(), no __iter__
                self.where[k] = f

    def get(self, name: str) -> torch.Tensor | None:
        f = self.where.get(name)
        return None if f is None else self._handles[f].get_tensor(name)

    def has(self, name: str) -> bool:
        return name in self.where


def _dequant(
    t: _Tensors, prefix: str, quant_algo: str | None, *, weight: str = "weight", hf: bool = False
) -> Linear:
    """One linear layer of either checkpoint kind; ``prefix`` ends with ``.``."""
    w = t.get(prefix + weight)
    if w is None:
        raise StandInError(f"tensor {prefix + weight} missing from the checkpoint")
    names = (
        {"wsf": "weight_scale", "wsf2": "weight_scale_2", "asf": "input_scale", "pqs": "pre_quant_scale"}
        if hf
        else {
            "wsf": "weights_scaling_factor",
            "wsf2": "weights_scaling_factor_2",
            "asf": "activation_scaling_factor",
            "pqs": "prequant_scaling_factor",
        }
    )
    wsf = t.get(prefix + names["wsf"])
    asf = _scalar(t.get(prefix + names["asf"]))
    pqs = t.get(prefix + names["pqs"])
    algo = (quant_algo or "").upper()
    if w.dtype == torch.float8_e4m3fn:
        if wsf is None:
            raise StandInError(f"{prefix}weight is FP8 without {names['wsf']}")
        deq = w.to(torch.float32) * wsf.float().reshape(-1)[0] if wsf.numel() == 1 else None
        if deq is None:  # per-channel FP8 (FP8_PC_PT): scale[out]
            deq = w.to(torch.float32) * wsf.float().reshape(-1, 1)
        act = ("fp8", asf) if asf is not None else None
    elif w.dtype in (torch.uint8, torch.int8) and ("AWQ" in algo or (wsf is not None and wsf.dim() == 2)):
        if "NVFP4" in algo:
            raise StandInError(
                "NVFP4 checkpoints are not served by the CPU stand-in (none can be built here)"
            )
        if wsf is None:
            raise StandInError(f"{prefix}weight is INT4 without {names['wsf']}")
        q = unpack_int4(w)
        group = q.shape[1] // wsf.shape[1]
        deq = q * wsf.float().repeat_interleave(group, dim=1)
        act = ("fp8", asf) if ("W4A8" in algo and asf is not None) else None
    elif w.dtype == torch.int8:
        if wsf is None:
            raise StandInError(f"{prefix}weight is INT8 without {names['wsf']}")
        deq = w.to(torch.float32) * wsf.float().reshape(-1, 1)
        act = ("int8", asf) if asf is not None else None
    elif w.dtype == torch.uint8:
        raise StandInError(f"{prefix}weight: packed format of quant_algo {quant_algo!r} not supported")
    else:
        deq = w.to(torch.float32)
        act = None
    return Linear(deq, None if pqs is None else pqs.float().reshape(-1), act)


def _concat(parts: list[Linear], dim: int) -> Linear:
    """Merge tensor-parallel shards of one linear layer (``dim`` 0: column parallel, 1: row parallel)."""
    if len(parts) == 1:
        return parts[0]
    weight = torch.cat([p.weight for p in parts], dim=dim)
    pqs = None
    if parts[0].pre_quant_scale is not None:
        scales = [p.pre_quant_scale for p in parts if p.pre_quant_scale is not None]
        pqs = torch.cat(scales) if dim == 1 else scales[0]
    act = parts[0].act_quant
    if act is not None:  # one per-tensor scale for the merged layer: the largest amax
        act = (act[0], max(p.act_quant[1] for p in parts if p.act_quant is not None))
    return Linear(weight, pqs, act)


def load_trtllm_checkpoint(path: str) -> Weights:
    """A TensorRT-LLM checkpoint directory (``config.json`` + ``rank{N}.safetensors``)."""
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    arch = cfg.get("architecture", "")
    if arch not in ("LlamaForCausalLM", "MistralForCausalLM"):
        raise StandInError(f"{path}/config.json: architecture {arch!r}: the stand-in runs Llama only")
    mapping = cfg.get("mapping") or {}
    tp, pp = int(mapping.get("tp_size", 1)), int(mapping.get("pp_size", 1))
    quant = cfg.get("quantization") or {}
    heads, kv_heads = (
        int(cfg["num_attention_heads"]),
        int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"]),
    )
    hidden = int(cfg["hidden_size"])
    head_dim = int(cfg.get("head_size") or hidden // heads)
    config = ModelConfig(
        vocab_size=int(cfg["vocab_size"]),
        hidden_size=hidden,
        num_layers=int(cfg["num_hidden_layers"]),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=int(cfg["intermediate_size"]),
        rms_norm_eps=float(cfg.get("norm_epsilon", 1e-6)),
        rope_theta=float(cfg.get("rotary_base", 10000.0)),
        max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
        quant_algo=quant.get("quant_algo"),
        kv_cache_quant_algo=quant.get("kv_cache_quant_algo"),
        tp_size=tp,
        pp_size=pp,
        logits_dtype=str(cfg.get("logits_dtype") or "float32"),
    )
    if cfg.get("rotary_scaling"):
        raise StandInError(f"{path}/config.json: rotary_scaling is not supported by the stand-in")
    world = tp * pp
    files = [os.path.join(path, f"rank{r}.safetensors") for r in range(world)]
    for f in files:
        if not os.path.isfile(f):
            raise StandInError(f"{f} missing: config.json maps {world} ranks (tp {tp} × pp {pp})")
    # TensorRT-LLM Mapping: rank = pp_rank · tp_size + tp_rank.
    ranks = [[_Tensors([files[p * tp + r]]) for r in range(tp)] for p in range(pp)]
    algo = config.quant_algo
    q_rows, kv_rows = heads * head_dim // tp, max(1, kv_heads // tp) * head_dim
    layers: list[Layer] = []
    for p in range(pp):
        local = 0
        while ranks[p][0].has(f"transformer.layers.{local}.attention.qkv.weight"):
            pre = f"transformer.layers.{local}."
            qkv = [_dequant(t, pre + "attention.qkv.", algo) for t in ranks[p]]
            qs, ks, vs = [], [], []
            for r, lin in enumerate(qkv):
                w = lin.weight
                qs.append(Linear(w[:q_rows], lin.pre_quant_scale, lin.act_quant))
                if kv_heads >= tp or r % (tp // kv_heads) == 0:  # replicated KV heads: one copy
                    ks.append(Linear(w[q_rows : q_rows + kv_rows], lin.pre_quant_scale, lin.act_quant))
                    vs.append(Linear(w[q_rows + kv_rows :], lin.pre_quant_scale, lin.act_quant))
            kv_scales = None
            if config.kv_cache_quant_algo:
                t0 = ranks[p][0]
                k_s = _scalar(t0.get(pre + "attention.k_cache_scaling_factor")) or _scalar(
                    t0.get(pre + "attention.kv_cache_scaling_factor")
                )
                v_s = _scalar(t0.get(pre + "attention.v_cache_scaling_factor")) or k_s
                if k_s is None or v_s is None:
                    raise StandInError(
                        f"{pre}attention: KV cache {config.kv_cache_quant_algo} without scales"
                    )
                kv_scales = (k_s, v_s)
            layers.append(
                Layer(
                    input_norm=ranks[p][0].get(pre + "input_layernorm.weight").float(),  # type: ignore[union-attr]
                    q=_concat(qs, 0),
                    k=_concat(ks, 0),
                    v=_concat(vs, 0),
                    o=_concat([_dequant(t, pre + "attention.dense.", algo) for t in ranks[p]], 1),
                    post_norm=ranks[p][0].get(pre + "post_layernorm.weight").float(),  # type: ignore[union-attr]
                    # TensorRT-LLM's GatedMLP: fc is the activated branch (HF gate_proj), gate is
                    # HF up_proj (TensorRT-LLM models/llama/convert.py).
                    gate=_concat([_dequant(t, pre + "mlp.fc.", algo) for t in ranks[p]], 0),
                    up=_concat([_dequant(t, pre + "mlp.gate.", algo) for t in ranks[p]], 0),
                    down=_concat([_dequant(t, pre + "mlp.proj.", algo) for t in ranks[p]], 1),
                    kv_scales=kv_scales,
                )
            )
            local += 1
    if len(layers) != config.num_layers:
        raise StandInError(
            f"{path}: found {len(layers)} layers in the rank files, config says {config.num_layers}"
        )
    first, last = ranks[0], ranks[-1]
    embed = torch.cat([t.get("transformer.vocab_embedding.weight").float() for t in first], 0)  # type: ignore[union-attr]
    lm_head = torch.cat([t.get("lm_head.weight").float() for t in last], 0)  # type: ignore[union-attr]
    vocab = config.vocab_size
    return Weights(
        config,
        embed[:vocab],
        layers,
        last[0].get("transformer.ln_f.weight").float(),  # type: ignore[union-attr]
        lm_head[:vocab],
        source=f"TensorRT-LLM checkpoint {path} (tp {tp}, pp {pp}, quant_algo {algo}, "
        f"kv {config.kv_cache_quant_algo})",
    )


def load_hf_checkpoint(path: str) -> Weights:
    """A unified Hugging Face checkpoint (ModelOpt ``export_hf_checkpoint`` or the source model)."""
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    archs = cfg.get("architectures") or []
    if not any(a in ("LlamaForCausalLM", "MistralForCausalLM") for a in archs):
        raise StandInError(f"{path}/config.json: architectures {archs}: the stand-in runs Llama only")
    qcfg = cfg.get("quantization_config") or {}
    if not qcfg and os.path.isfile(os.path.join(path, "hf_quant_config.json")):
        with open(os.path.join(path, "hf_quant_config.json"), encoding="utf-8") as f:
            qcfg = (json.load(f) or {}).get("quantization") or {}
    algo = qcfg.get("quant_algo")
    kv_algo = qcfg.get("kv_cache_quant_algo") or ("FP8" if qcfg.get("kv_cache_scheme") else None)
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    if cfg.get("rope_scaling"):
        raise StandInError(f"{path}/config.json: rope_scaling is not supported by the stand-in")
    config = ModelConfig(
        vocab_size=int(cfg["vocab_size"]),
        hidden_size=hidden,
        num_layers=int(cfg["num_hidden_layers"]),
        num_heads=heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        intermediate_size=int(cfg["intermediate_size"]),
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=float(cfg.get("rope_theta", 10000.0)),
        max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
        quant_algo=algo,
        kv_cache_quant_algo=kv_algo,
    )
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    if not files:
        raise StandInError(f"{path}: no *.safetensors")
    t = _Tensors(files)
    layers = []
    for i in range(config.num_layers):
        pre = f"model.layers.{i}."
        kv_scales = None
        if kv_algo:
            k_s = _scalar(t.get(pre + "self_attn.k_proj.k_scale")) or _scalar(
                t.get(pre + "self_attn.k_scale")
            )
            v_s = _scalar(t.get(pre + "self_attn.v_proj.v_scale")) or _scalar(
                t.get(pre + "self_attn.v_scale")
            )
            if k_s is not None and v_s is not None:
                # ModelOpt exports k_scale / v_scale as amax / maxbound (_KV_CACHE_REPLACEMENTS).
                kv_scales = (k_s, v_s)
        layers.append(
            Layer(
                input_norm=t.get(pre + "input_layernorm.weight").float(),  # type: ignore[union-attr]
                q=_dequant(t, pre + "self_attn.q_proj.", algo, hf=True),
                k=_dequant(t, pre + "self_attn.k_proj.", algo, hf=True),
                v=_dequant(t, pre + "self_attn.v_proj.", algo, hf=True),
                o=_dequant(t, pre + "self_attn.o_proj.", algo, hf=True),
                post_norm=t.get(pre + "post_attention_layernorm.weight").float(),  # type: ignore[union-attr]
                gate=_dequant(t, pre + "mlp.gate_proj.", algo, hf=True),
                up=_dequant(t, pre + "mlp.up_proj.", algo, hf=True),
                down=_dequant(t, pre + "mlp.down_proj.", algo, hf=True),
                kv_scales=kv_scales,
            )
        )
    embed = t.get("model.embed_tokens.weight")
    lm_head = t.get("lm_head.weight")
    if lm_head is None and cfg.get("tie_word_embeddings"):
        lm_head = embed
    if embed is None or lm_head is None:
        raise StandInError(f"{path}: model.embed_tokens.weight or lm_head.weight missing")
    return Weights(
        config,
        embed.float(),
        layers,
        t.get("model.norm.weight").float(),  # type: ignore[union-attr]
        lm_head.float(),
        source=f"unified Hugging Face checkpoint {path} (quant_algo {algo}, kv {kv_algo})",
    )


def load_checkpoint(path: str) -> Weights:
    """Either checkpoint kind, told apart by ``rank0.safetensors`` (TensorRT-LLM) vs HF files."""
    if os.path.isfile(os.path.join(path, "rank0.safetensors")):
        return load_trtllm_checkpoint(path)
    if os.path.isfile(os.path.join(path, "config.json")):
        return load_hf_checkpoint(path)
    raise StandInError(
        f"{path}: neither a TensorRT-LLM checkpoint (rank0.safetensors) nor a Hugging Face one"
    )


# --------------------------------------------------------------------------------------- model
def _rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """GPT-NeoX rotary embedding (``rope_gpt_neox``; HF Llama's ``rotate_half``). x: [heads, n, d]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class BlockPool:
    """The paged KV-cache pool: ``max_blocks`` blocks of ``tokens_per_block`` tokens.

    Block storage is allocated when a block is first written (a pool sized for an 80 GB GPU costs
    nothing until used); ``used`` counts blocks held by sequences, as the executor's
    ``KvCacheStats.usedNumBlocks`` does.
    """

    def __init__(self, max_blocks: int, tokens_per_block: int) -> None:
        if max_blocks < 1 or tokens_per_block < 1:
            raise StandInError(f"KV pool of {max_blocks} blocks × {tokens_per_block} tokens is empty")
        self.max_blocks = max_blocks
        self.tokens_per_block = tokens_per_block
        self._free = list(range(max_blocks - 1, -1, -1))
        self.storage: dict[int, torch.Tensor] = {}
        self.lock = threading.Lock()

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def used(self) -> int:
        return self.max_blocks - len(self._free)

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.tokens_per_block)

    def allocate(self, n: int) -> list[int]:
        with self.lock:
            if n > len(self._free):
                raise StandInError(f"KV pool: {n} blocks asked, {len(self._free)} free")
            return [self._free.pop() for _ in range(n)]

    def release(self, blocks: list[int]) -> None:
        with self.lock:
            for b in blocks:
                self.storage.pop(b, None)
                self._free.append(b)


class Sequence:
    """One request's decoding state: its tokens, its KV blocks (reserved) and the cached K/V."""

    def __init__(self, prompt: list[int]) -> None:
        self.tokens = list(prompt)
        self.prompt_len = len(prompt)
        self.cached = 0  # tokens whose K/V are in the cache
        self.blocks: list[int] = []


class LlamaRunner:
    """fp32 Llama forward over paged K/V storage (one sequence at a time; tiny models only)."""

    def __init__(self, weights: Weights, pool: BlockPool) -> None:
        self.w = weights
        self.c = weights.config
        self.pool = pool
        torch.set_grad_enabled(False)

    def _kv(self, seq: Sequence, layer: int, upto: int) -> tuple[torch.Tensor, torch.Tensor]:
        tpb = self.pool.tokens_per_block
        ks, vs = [], []
        for b in seq.blocks[: math.ceil(upto / tpb)]:
            blk = self.pool.storage[b]
            ks.append(blk[layer, 0])
            vs.append(blk[layer, 1])
        return torch.cat(ks, dim=1)[:, :upto], torch.cat(vs, dim=1)[:, :upto]

    def _store(self, seq: Sequence, layer: int, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        tpb = self.pool.tokens_per_block
        c = self.c
        for i in range(k.shape[1]):
            pos = start + i
            b = seq.blocks[pos // tpb]
            blk = self.pool.storage.get(b)
            if blk is None:
                blk = torch.zeros((c.num_layers, 2, c.num_kv_heads, tpb, c.head_dim))
                self.pool.storage[b] = blk
            blk[layer, 0, :, pos % tpb] = k[:, i]
            blk[layer, 1, :, pos % tpb] = v[:, i]

    def step(self, seq: Sequence, *, all_logits: bool = False) -> torch.Tensor:
        """Run the tokens of ``seq`` not yet in the cache; returns logits ``[n, vocab]`` (all new
        positions when ``all_logits``, else the last one only, as ``[1, vocab]``)."""
        c, w = self.c, self.w
        start = seq.cached
        ids = torch.tensor(seq.tokens[start:], dtype=torch.long)
        n = ids.shape[0]
        positions = torch.arange(start, start + n)
        x = w.embed[ids]
        group = c.num_heads // c.num_kv_heads
        for li, layer in enumerate(w.layers):
            h = _rms_norm(x, layer.input_norm, c.rms_norm_eps)
            q = layer.q(h).view(n, c.num_heads, c.head_dim).transpose(0, 1)
            k = layer.k(h).view(n, c.num_kv_heads, c.head_dim).transpose(0, 1)
            v = layer.v(h).view(n, c.num_kv_heads, c.head_dim).transpose(0, 1)
            q, k = _rope(q, positions, c.rope_theta), _rope(k, positions, c.rope_theta)
            if layer.kv_scales is not None:
                kind = "fp8" if (c.kv_cache_quant_algo or "").upper() == "FP8" else "int8"
                k, v = fake_quant(k, kind, layer.kv_scales[0]), fake_quant(v, kind, layer.kv_scales[1])
            self._store(seq, li, start, k, v)
            keys, values = self._kv(seq, li, start + n)
            keys = keys.repeat_interleave(group, dim=0)
            values = values.repeat_interleave(group, dim=0)
            scores = (q @ keys.transpose(1, 2)) / math.sqrt(c.head_dim)
            mask = torch.arange(start + n)[None, :] > positions[:, None]
            scores = scores.masked_fill(mask[None], float("-inf"))
            attn = torch.softmax(scores, dim=-1) @ values
            x = x + layer.o(attn.transpose(0, 1).reshape(n, c.num_heads * c.head_dim))
            h = _rms_norm(x, layer.post_norm, c.rms_norm_eps)
            x = x + layer.down(torch.nn.functional.silu(layer.gate(h)) * layer.up(h))
        seq.cached = start + n
        x = _rms_norm(x if all_logits else x[-1:], w.norm, c.rms_norm_eps)
        return x @ w.lm_head.T


# --------------------------------------------------------------------------------------- executor
@dataclass
class SamplingConfig:
    max_new_tokens: int
    end_id: int | None = None
    pad_id: int | None = None
    top_k: int = 0
    top_p: float = 0.0
    temperature: float = 1.0
    seed: int | None = None
    min_tokens: int = 0
    stop_words: list[list[int]] = field(default_factory=list)
    bad_words: list[list[int]] = field(default_factory=list)
    embedding_bias: torch.Tensor | None = None
    return_log_probs: bool = False
    return_context_logits: bool = False
    return_generation_logits: bool = False


@dataclass
class Result:
    """What the executor hands back for a request: new tokens so far (streaming) or at the end."""

    new_tokens: list[int]
    all_output_tokens: list[int]
    finished: bool
    log_probs: list[float]
    context_logits: torch.Tensor | None = None
    generation_logits: list[torch.Tensor] | None = None
    arrival_ns: int = 0
    first_scheduled_ns: int = 0
    first_token_ns: int = 0
    last_token_ns: int = 0
    kv_blocks: int = 0
    error: str | None = None


class Request:
    def __init__(
        self,
        rid: int,
        prompt: list[int],
        sampling: SamplingConfig,
        streaming: bool,
        on_result: Callable[[Result], None],
    ) -> None:
        self.rid = rid
        self.seq = Sequence(prompt)
        self.sampling = sampling
        self.streaming = streaming
        self.on_result = on_result
        self.generated: list[int] = []
        self.log_probs: list[float] = []
        self.generation_logits: list[torch.Tensor] = []
        self.context_logits: torch.Tensor | None = None
        self.arrival_ns = time.time_ns()
        self.first_scheduled_ns = 0
        self.first_token_ns = 0
        self.last_token_ns = 0
        self.cancelled = False
        self.reserved = 0
        gen = torch.Generator()
        gen.manual_seed(sampling.seed if sampling.seed is not None else 0)
        self.generator = gen

    @property
    def total_tokens(self) -> int:
        return self.seq.prompt_len + self.sampling.max_new_tokens


@dataclass
class IterationStats:
    """One executor iteration, the fields ``model_instance_state.cc`` reads (v0.19.0)."""

    iteration: int = 0
    timestamp: float = 0.0
    active: int = 0
    max_active: int = 0
    scheduled: int = 0
    context: int = 0
    generation: int = 0
    paused: int = 0
    context_tokens: int = 0
    kv_max: int = 0
    kv_free: int = 0
    kv_used: int = 0
    kv_tokens_per_block: int = 0
    kv_reused: int = 0

    @property
    def waiting(self) -> int:
        # model_instance_state.cc (v0.19.0): numActiveRequests - numScheduledRequests
        return self.active - self.scheduled

    @property
    def kv_fraction(self) -> float:
        # model_instance_state.cc (v0.19.0): used / max, 0 when max is 0
        return self.kv_used / self.kv_max if self.kv_max > 0 else 0.0


class Executor:
    """Inflight batching over one :class:`LlamaRunner` in a background thread.

    ``max_batch_size`` bounds a step's batch; ``max_num_active`` (:func:`max_num_active_requests`)
    bounds admitted requests; the rest wait in :attr:`queue` (the executor's queue, not exported
    by the Triton backend). ``policy`` is ``guaranteed_no_evict`` or ``max_utilization``.
    """

    def __init__(
        self,
        weights: Weights,
        pool: BlockPool,
        *,
        max_batch_size: int,
        max_num_active: int,
        max_num_tokens: int | None,
        max_seq_len: int | None,
        policy: str = "guaranteed_no_evict",
        log: Callable[[str], None] = print,
    ) -> None:
        self.runner = LlamaRunner(weights, pool)
        self.pool = pool
        self.max_batch_size = max_batch_size
        self.max_num_active = max_num_active
        self.max_num_tokens = max_num_tokens
        self.max_seq_len = max_seq_len
        self.policy = policy
        self.log = log
        self.queue: deque[Request] = deque()
        self.active: list[Request] = []
        self.cond = threading.Condition()
        self.stats = IterationStats(
            max_active=max_num_active,
            kv_max=pool.max_blocks,
            kv_free=pool.max_blocks,
            kv_tokens_per_block=pool.tokens_per_block,
        )
        self._stop = False
        self._next = 0
        self.thread = threading.Thread(target=self._loop, name="standin-executor", daemon=True)
        self.thread.start()

    # -- API ------------------------------------------------------------------------------------
    def validate(self, prompt: list[int], sampling: SamplingConfig) -> str | None:
        vocab = self.runner.c.vocab_size
        if not prompt:
            return "input_ids is empty"
        if any(t < 0 or t >= vocab for t in prompt):
            return f"input_ids holds token ids outside the vocabulary [0, {vocab})"
        if sampling.max_new_tokens < 1:
            return f"request_output_len {sampling.max_new_tokens}: must be ≥ 1"
        total = len(prompt) + sampling.max_new_tokens
        if self.max_seq_len is not None and total > self.max_seq_len:
            return (
                f"prompt length ({len(prompt)}) + request_output_len ({sampling.max_new_tokens}) = {total} "
                f"exceeds max_seq_len ({self.max_seq_len})"
            )
        if self.max_num_tokens is not None and len(prompt) > self.max_num_tokens:
            return (
                f"prompt length {len(prompt)} exceeds max_num_tokens {self.max_num_tokens} "
                "(chunked context off)"
            )
        if self.pool.blocks_for(total) > self.pool.max_blocks:
            need = self.pool.blocks_for(total)
            return f"the request needs {need} KV blocks; the pool holds {self.pool.max_blocks}"
        return None

    def submit(
        self,
        prompt: list[int],
        sampling: SamplingConfig,
        streaming: bool,
        on_result: Callable[[Result], None],
    ) -> Request:
        with self.cond:
            self._next += 1
            req = Request(self._next, prompt, sampling, streaming, on_result)
            self.queue.append(req)
            self.cond.notify()
        return req

    def cancel(self, req: Request) -> None:
        req.cancelled = True

    def shutdown(self) -> None:
        with self.cond:
            self._stop = True
            self.cond.notify()
        self.thread.join(timeout=10)

    # -- loop -----------------------------------------------------------------------------------
    def _admit(self) -> None:
        while self.queue and len(self.active) < self.max_num_active:
            self.active.append(self.queue.popleft())

    def _schedule(self) -> list[Request]:
        """Capacity + micro-batch scheduling of one iteration (GUARANTEED_NO_EVICT reserves a
        request's whole length; MAX_UTILIZATION what the next step needs)."""
        batch: list[Request] = []
        tokens = 0
        for req in self.active:
            if req.cancelled or len(batch) >= self.max_batch_size:
                continue
            step_tokens = len(req.seq.tokens) - req.seq.cached
            if self.max_num_tokens is not None and batch and tokens + step_tokens > self.max_num_tokens:
                continue
            if self.policy == "max_utilization":
                need = self.pool.blocks_for(len(req.seq.tokens)) - len(req.seq.blocks)
            else:
                need = self.pool.blocks_for(req.total_tokens) - len(req.seq.blocks)
            if need > 0:
                if need > self.pool.free:
                    continue
                req.seq.blocks += self.pool.allocate(need)
            batch.append(req)
            tokens += step_tokens
        return batch

    def _loop(self) -> None:
        iteration = 0
        while True:
            with self.cond:
                while not self._stop and not self.queue and not self.active:
                    self._publish(iteration, [], 0)
                    self.cond.wait(timeout=0.5)
                if self._stop:
                    return
                self._admit()
            for req in [r for r in self.active if r.cancelled]:
                self._finish(req, error="cancelled")
            batch = self._schedule()
            context = [r for r in batch if r.seq.cached == 0]
            iteration += 1
            self._publish(iteration, batch, sum(r.seq.prompt_len for r in context))
            if not batch:
                time.sleep(0.005)
                continue
            now = time.time_ns()
            for req in batch:
                if not req.first_scheduled_ns:
                    req.first_scheduled_ns = now
                try:
                    self._advance(req)
                except Exception as exc:
                    self.log(f"stand-in: request {req.rid} failed: {exc!r}")
                    self._finish(req, error=str(exc))

    def _publish(self, iteration: int, batch: list[Request], context_tokens: int) -> None:
        context = sum(1 for r in batch if r.seq.cached == 0)
        self.stats = IterationStats(
            iteration=iteration,
            timestamp=time.time(),
            active=len(self.active),
            max_active=self.max_num_active,
            scheduled=len(batch),
            context=context,
            generation=len(batch) - context,
            paused=0,
            context_tokens=context_tokens,
            kv_max=self.pool.max_blocks,
            kv_free=self.pool.free,
            kv_used=self.pool.used,
            kv_tokens_per_block=self.pool.tokens_per_block,
            kv_reused=0,
        )

    def _advance(self, req: Request) -> None:
        s = req.sampling
        first = req.seq.cached == 0
        logits = self.runner.step(req.seq, all_logits=first and s.return_context_logits)
        if first and s.return_context_logits:
            req.context_logits = logits.clone()
        last = logits[-1].clone()
        if s.return_generation_logits:
            req.generation_logits.append(last.clone())
        token, logp = self._sample(req, last)
        now = time.time_ns()
        if not req.first_token_ns:
            req.first_token_ns = now
        req.last_token_ns = now
        req.generated.append(token)
        req.log_probs.append(logp)
        req.seq.tokens.append(token)
        done = len(req.generated) >= s.max_new_tokens
        if s.end_id is not None and token == s.end_id and len(req.generated) >= max(1, s.min_tokens):
            done = True
        for word in s.stop_words:
            if word and req.generated[-len(word) :] == word:
                done = True
        if done:
            self._finish(req)
        elif req.streaming:
            req.on_result(self._result(req, [token], finished=False))

    def _sample(self, req: Request, logits: torch.Tensor) -> tuple[int, float]:
        s = req.sampling
        logits = logits.clone()
        if s.embedding_bias is not None and s.embedding_bias.numel() == logits.numel():
            logits = logits + s.embedding_bias
        for word in s.bad_words:
            if len(word) == 1:
                logits[word[0]] = float("-inf")
        if s.end_id is not None and len(req.generated) < s.min_tokens:
            logits[s.end_id] = float("-inf")
        logprobs = torch.log_softmax(logits, dim=-1)
        greedy = (s.top_k in (0, 1) and s.top_p <= 0.0) or s.top_k == 1 or s.temperature <= 0.0
        if greedy:
            token = int(torch.argmax(logits))
        else:
            scaled = logits / max(s.temperature, 1e-5)
            if s.top_k > 0:
                kth = torch.topk(scaled, min(s.top_k, scaled.numel())).values[-1]
                scaled = scaled.masked_fill(scaled < kth, float("-inf"))
            probs = torch.softmax(scaled, dim=-1)
            if 0.0 < s.top_p < 1.0:
                sorted_p, idx = torch.sort(probs, descending=True)
                keep = torch.cumsum(sorted_p, 0) - sorted_p < s.top_p
                mask = torch.zeros_like(probs, dtype=torch.bool)
                mask[idx[keep]] = True
                probs = torch.where(mask, probs, torch.zeros_like(probs))
                probs = probs / probs.sum()
            token = int(torch.multinomial(probs, 1, generator=req.generator))
        return token, float(logprobs[token])

    def _result(self, req: Request, new: list[int], *, finished: bool, error: str | None = None) -> Result:
        return Result(
            new_tokens=new,
            all_output_tokens=list(req.generated),
            finished=finished,
            log_probs=list(req.log_probs),
            context_logits=req.context_logits,
            generation_logits=list(req.generation_logits) if req.sampling.return_generation_logits else None,
            arrival_ns=req.arrival_ns,
            first_scheduled_ns=req.first_scheduled_ns,
            first_token_ns=req.first_token_ns,
            last_token_ns=req.last_token_ns,
            kv_blocks=len(req.seq.blocks),
            error=error,
        )

    def _finish(self, req: Request, error: str | None = None) -> None:
        new = req.generated[-1:] if req.streaming else list(req.generated)
        result = self._result(req, new, finished=True, error=error)
        self.pool.release(req.seq.blocks)
        req.seq.blocks = []
        if req in self.active:
            self.active.remove(req)
        req.on_result(result)


def max_num_active_requests(max_batch_size: int, pp_size: int) -> int:
    """``getMaxNumSequences()``: ``max_batch_size`` × micro batches (the pipeline-parallel size, or 1
    without TRT overlap; TensorRT-LLM ``trtGptModelInflightBatching.cpp``)."""
    return max_batch_size * (pp_size if pp_size > 1 else 1)


def kv_pool_blocks(
    *, tokens_per_block: int, plan_max_kv_tokens: int | None, max_tokens_in_paged_kv_cache: int | None
) -> int:
    """Blocks in the pool: ``min(max_tokens_in_paged_kv_cache, the plan's KV tokens)`` / tokens per
    block (the backend's ``max_tokens_in_paged_kv_cache`` bounds what the memory fraction gives,
    docs/reference/tensorrt-llm.md §4.3; the plan computed the fraction's tokens for the target GPU)."""
    limits = [t for t in (plan_max_kv_tokens, max_tokens_in_paged_kv_cache) if t]
    if not limits:
        raise StandInError(
            "no KV-cache size: neither the plan's max_kv_tokens nor max_tokens_in_paged_kv_cache"
        )
    return max(1, min(limits) // tokens_per_block)


def engine_limits_from_manifest(manifest: dict[str, Any]) -> dict[str, int]:
    """The limits ``trtllm-build`` would bake into the engine, read from the artifact's manifest:
    the recorded build command (``compile.command``) and the plan. Keys: ``max_batch_size``,
    ``max_seq_len``, ``max_num_tokens``, ``tokens_per_block``, ``max_kv_tokens`` (absent = unknown)."""
    out: dict[str, int] = {}
    plan = manifest.get("plan") or {}
    for key in ("max_batch_size", "max_seq_len", "max_num_tokens", "tokens_per_block", "max_kv_tokens"):
        if plan.get(key):
            out[key] = int(plan[key])
    cmd = (manifest.get("compile") or {}).get("command") or []
    for i, arg in enumerate(cmd[:-1]):
        m = re.fullmatch(r"--(max_batch_size|max_seq_len|max_num_tokens|tokens_per_block)", str(arg))
        if m:
            out[m.group(1)] = int(cmd[i + 1])
    return out
