"""Stand-in for the image's ``preprocessing`` model (TensorRT-LLM ``triton_backend/all_models/
inflight_batcher_llm/preprocessing/1/model.py``), for CPU runs of tests and ``make demo``.

The real file ships in the TensorRT-LLM serving image, which is not available here; this one was
written for trtllm-operator against the same tensor interface (the ``preprocessing/config.pbtxt``
the builder packages) and tokenizes with the real Hugging Face tokenizer of the artifact:
``QUERY`` → ``INPUT_ID`` / ``REQUEST_INPUT_LEN`` (``add_special_tokens`` parameter), decoder ids
``[[pad_id]]`` with length 1 when no ``DECODER_QUERY``, ``BAD_WORDS_IDS`` / ``STOP_WORDS_IDS`` in
the ``[batch, 2, n]`` word-list format, ``EMBEDDING_BIAS`` (empty unless words and weights are
given), ``OUT_END_ID`` / ``OUT_PAD_ID`` from the request or the tokenizer's eos / pad token.
Multimodal inputs are refused.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_common import flag, load_tokenizer, word_list

MULTIMODAL = ("IMAGE_BYTES", "IMAGE_URL", "IMAGES", "VIDEO_BYTES")


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.tokenizer = load_tokenizer(self.model_config)
        self.add_special_tokens = flag(self.model_config, "add_special_tokens", True)
        tok = self.tokenizer
        self.end_id = tok.encode(tok.eos_token, add_special_tokens=False)[0]
        self.pad_id = tok.encode(tok.pad_token, add_special_tokens=False)[0]
        self.vocab = len(tok)
        self.outputs = {
            o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in self.model_config["output"]
        }

    def _encode(self, texts):
        ids = [
            np.array(
                self.tokenizer.encode(
                    t.decode() if isinstance(t, bytes) else str(t), add_special_tokens=self.add_special_tokens
                ),
                dtype=np.int32,
            )
            for t in texts
        ]
        lengths = np.array([[len(i)] for i in ids], dtype=np.int32)
        width = max(1, *(len(i) for i in ids))
        padded = np.full((len(ids), width), self.pad_id, dtype=np.int32)
        for row, i in enumerate(ids):
            padded[row, : len(i)] = i
        return padded, lengths

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(pb_utils.InferenceResponse(output_tensors=self._one(request)))
            except ValueError as exc:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
        return responses

    def _one(self, request):
        for name in MULTIMODAL:
            if pb_utils.get_input_tensor_by_name(request, name) is not None:
                raise ValueError(f"{name}: multimodal input is not supported by this stand-in")

        def get(name):
            t = pb_utils.get_input_tensor_by_name(request, name)
            return None if t is None else t.as_numpy()

        query = get("QUERY")
        batch = query.shape[0]
        input_id, input_len = self._encode(query.reshape(batch, -1)[:, 0])
        end_id = get("END_ID")
        end_id = np.full((batch, 1), self.end_id, np.int32) if end_id is None else end_id.reshape(batch, 1)
        pad_id = get("PAD_ID")
        pad_id = np.full((batch, 1), self.pad_id, np.int32) if pad_id is None else pad_id.reshape(batch, 1)
        decoder = get("DECODER_QUERY")
        if decoder is not None:
            decoder_id, decoder_len = self._encode(decoder.reshape(batch, -1)[:, 0])
        else:
            decoder_id, decoder_len = pad_id * np.ones((batch, 1), np.int32), np.ones((batch, 1), np.int32)
        bias_words, bias_weights = get("EMBEDDING_BIAS_WORDS"), get("EMBEDDING_BIAS_WEIGHTS")
        if bias_words is None or bias_weights is None:
            bias = np.empty((batch, 0), np.float32)
        else:
            bias = np.zeros((batch, self.vocab), np.float32)
            for row in range(batch):
                for word, weight in zip(bias_words[row], bias_weights[row], strict=True):
                    for i in self.tokenizer.encode(word.decode() if isinstance(word, bytes) else str(word)):
                        bias[row, i] += weight
        values = {
            "INPUT_ID": input_id,
            "REQUEST_INPUT_LEN": input_len,
            "DECODER_INPUT_ID": decoder_id,
            "REQUEST_DECODER_INPUT_LEN": decoder_len,
            "BAD_WORDS_IDS": word_list(self.tokenizer, get("BAD_WORDS_DICT"), batch),
            "STOP_WORDS_IDS": word_list(self.tokenizer, get("STOP_WORDS_DICT"), batch),
            "EMBEDDING_BIAS": bias,
            "REQUEST_OUTPUT_LEN": get("REQUEST_OUTPUT_LEN"),
            "OUT_END_ID": end_id,
            "OUT_PAD_ID": pad_id,
        }
        extra = get("PROMPT_TABLE_EXTRA_ID")
        if extra is not None:
            values["OUT_PROMPT_TABLE_EXTRA_IDS"] = np.where(
                input_id >= self.vocab, extra.reshape(batch, 1), 0
            )
        return [
            pb_utils.Tensor(name, np.asarray(value).astype(self.outputs[name]))
            for name, value in values.items()
            if name in self.outputs
        ]
