"""``engine-builder make-tiny-model DIR``: a random-initialised tiny Llama for demos and tests.

Everything is built locally — no download: a byte-level BPE tokenizer trained with the
``tokenizers`` library on the bundled calibration text (CC0), wrapped as a
``PreTrainedTokenizerFast``, and a ``LlamaForCausalLM`` with seeded random weights saved as
safetensors. Defaults (hidden 128, 4 heads, 2 KV heads, intermediate 256, vocab ≤ 512) are the
smallest shape that exercises tensor parallelism 2 (KV heads divisible by 2) and AWQ with block
size 64 at TP 2 (each rank's input dimension must be a multiple of the block). Same arguments →
same files, byte for byte.
"""

# ruff: noqa: PLC0415 - torch / transformers / tokenizers are imported only by the command, so a bad spec fails in milliseconds.

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any


def make_tiny_model(
    out_dir: Path,
    *,
    layers: int = 2,
    hidden_size: int = 128,
    intermediate_size: int = 256,
    heads: int = 4,
    kv_heads: int = 2,
    vocab_size: int = 512,
    max_position_embeddings: int = 512,
    dtype: str = "float32",
    seed: int = 0,
) -> dict[str, Any]:
    """Write ``config.json``, ``model.safetensors`` and tokenizer files to ``out_dir``.

    Returns ``{"dir", "params", "vocab_size"}``. ``vocab_size`` is an upper bound: the model's vocab
    is the trained tokenizer's size.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out_dir.mkdir(parents=True, exist_ok=True)
    text = resources.files("engine_builder").joinpath("data", "calibration.txt").read_text("utf-8")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    special = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    fast: Any = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.save_pretrained(str(out_dir))

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        architectures=["LlamaForCausalLM"],
    )
    model = LlamaForCausalLM(config).to(getattr(torch, dtype)).eval()
    model.save_pretrained(str(out_dir))
    return {
        "dir": str(out_dir),
        "params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(fast),
    }


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "make-tiny-model",
        help="write a random-initialised tiny Llama (safetensors + locally trained tokenizer)",
    )
    p.add_argument("dir", type=Path)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--intermediate-size", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--vocab-size", type=int, default=512)
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    info = make_tiny_model(
        args.dir,
        layers=args.layers,
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        heads=args.heads,
        kv_heads=args.kv_heads,
        vocab_size=args.vocab_size,
        dtype=args.dtype,
        seed=args.seed,
    )
    print(f"tiny Llama: {info['params']} parameters, vocab {info['vocab_size']} → {info['dir']}")
    return 0
