"""Shared by the stand-ins of the image's pre/post-processing and BLS models (see their model.py)."""

from __future__ import annotations

import numpy as np
from transformers import AutoTokenizer


def param(model_config, key, default=None):
    value = (model_config.get("parameters") or {}).get(key, {}).get("string_value")
    if value is None or value == "" or value.startswith("${"):
        return default
    return value


def flag(model_config, key, default):
    value = param(model_config, key)
    if value is None:
        return default
    return value.strip().lower() in ("true", "1", "t", "y", "yes")


def load_tokenizer(model_config):
    """The Hugging Face tokenizer in ``tokenizer_dir`` (left padding; pad falls back to eos), as the
    image's preprocessing model loads it (``AutoTokenizer.from_pretrained(tokenizer_dir, legacy=False,
    padding_side="left", trust_remote_code=True)``)."""
    path = param(model_config, "tokenizer_dir")
    if not path:
        raise ValueError("parameter tokenizer_dir is not set")
    tok = AutoTokenizer.from_pretrained(path, legacy=False, padding_side="left", trust_remote_code=True)
    if not tok.pad_token:
        tok.pad_token = tok.eos_token
    return tok


def word_list(tokenizer, words_per_item, batch_size):
    """The ``[batch, 2, n]`` word-list format (flat ids; cumulative end offsets padded with −1)."""
    if words_per_item is None:
        return np.empty([batch_size, 2, 0], dtype=np.int32)
    flat, offsets = [], []
    for words in words_per_item:
        ids_all, ends = [], []
        for word in words:
            text = word.decode() if isinstance(word, bytes) else str(word)
            ids = tokenizer.encode(text, add_special_tokens=False)
            if ids:
                ids_all += ids
                ends.append(len(ids_all))
        flat.append(ids_all)
        offsets.append(ends)
    width = max(1, *(len(f) for f in flat))
    out = np.zeros((len(flat), 2, width), dtype=np.int32)
    out[:, 1, :] = -1
    for i, (ids, ends) in enumerate(zip(flat, offsets, strict=True)):
        out[i, 0, : len(ids)] = ids
        out[i, 1, : len(ends)] = ends
    return out
