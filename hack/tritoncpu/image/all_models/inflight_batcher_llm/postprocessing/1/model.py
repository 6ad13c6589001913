"""Stand-in for the image's ``postprocessing`` model (TensorRT-LLM ``triton_backend/all_models/
inflight_batcher_llm/postprocessing/1/model.py``), for CPU runs of tests and ``make demo``.

Written for trtllm-operator against the ``postprocessing/config.pbtxt`` interface the builder
packages: ``TOKENS_BATCH`` ``[batch, beam, tokens]`` and ``SEQUENCE_LENGTH`` ``[batch, beam]`` →
``OUTPUT`` ``[batch, beam]`` text, decoding each beam's first ``SEQUENCE_LENGTH`` tokens with the
artifact's Hugging Face tokenizer (``skip_special_tokens`` parameter, default true).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_common import flag, load_tokenizer


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.tokenizer = load_tokenizer(self.model_config)
        self.skip_special_tokens = flag(self.model_config, "skip_special_tokens", True)

    def execute(self, requests):
        responses = []
        for request in requests:
            tokens = pb_utils.get_input_tensor_by_name(request, "TOKENS_BATCH").as_numpy()
            lengths = pb_utils.get_input_tensor_by_name(request, "SEQUENCE_LENGTH").as_numpy()
            if tokens.ndim == 2:
                tokens = tokens[:, None, :]
            lengths = lengths.reshape(tokens.shape[0], tokens.shape[1])
            texts = [
                [
                    self.tokenizer.decode(
                        tokens[b, k, : lengths[b, k]].tolist(), skip_special_tokens=self.skip_special_tokens
                    ).encode("utf-8")
                    for k in range(tokens.shape[1])
                ]
                for b in range(tokens.shape[0])
            ]
            out = pb_utils.Tensor("OUTPUT", np.array(texts, dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
