"""Stand-in for the image's ``tensorrt_llm_bls`` model (TensorRT-LLM ``triton_backend/all_models/
inflight_batcher_llm/tensorrt_llm_bls/1/model.py``), for CPU runs of tests and ``make demo``.

Written for trtllm-operator against the ``tensorrt_llm_bls/config.pbtxt`` interface the builder
packages. Business-logic scripting (Triton BLS) chains the same three models as the ensemble:
``preprocessing`` → ``tensorrt_llm`` (``tensorrt_llm_model_name`` parameter) → ``postprocessing``.
Decoupled with ``stream``: one response per ``tensorrt_llm`` response (each carrying its new text;
with ``accumulate_tokens`` the text of all tokens so far). A draft model
(``tensorrt_llm_draft_model_name``, draft-target speculative decoding) is accepted at load, as
upstream's BLS accepts it; a request with ``num_draft_tokens`` > 0 is refused with an error naming
the input: the draft/verify loop (upstream ``lib/decode.py`` ``_spec_generate``) needs the engine's
``draft_input_ids`` path, which the CPU stand-in backend does not have. Without ``num_draft_tokens``
the request is served by the target alone, as upstream's ``decode.py`` does.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_common import flag, param

# BLS input → preprocessing input, and → tensorrt_llm input (the ensemble's input_map).
TO_PRE = {
    "text_input": "QUERY",
    "decoder_text_input": "DECODER_QUERY",
    "max_tokens": "REQUEST_OUTPUT_LEN",
    "bad_words": "BAD_WORDS_DICT",
    "stop_words": "STOP_WORDS_DICT",
    "embedding_bias_words": "EMBEDDING_BIAS_WORDS",
    "embedding_bias_weights": "EMBEDDING_BIAS_WEIGHTS",
    "end_id": "END_ID",
    "pad_id": "PAD_ID",
}
PRE_TO_LLM = {
    "INPUT_ID": "input_ids",
    "REQUEST_INPUT_LEN": "input_lengths",
    "REQUEST_OUTPUT_LEN": "request_output_len",
    "BAD_WORDS_IDS": "bad_words_list",
    "STOP_WORDS_IDS": "stop_words_list",
    "EMBEDDING_BIAS": "embedding_bias",
    "OUT_END_ID": "end_id",
    "OUT_PAD_ID": "pad_id",
}
TO_LLM = {
    "exclude_input_in_output": "exclude_input_in_output",
    "top_k": "runtime_top_k",
    "top_p": "runtime_top_p",
    "temperature": "temperature",
    "length_penalty": "len_penalty",
    "repetition_penalty": "repetition_penalty",
    "min_tokens": "min_tokens",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "seed": "seed",
    "return_log_probs": "return_log_probs",
    "return_context_logits": "return_context_logits",
    "return_generation_logits": "return_generation_logits",
    "num_return_sequences": "num_return_sequences",
    "beam_width": "beam_width",
    "stream": "streaming",
    "return_perf_metrics": "return_perf_metrics",
}
PASS_THROUGH = (
    "cum_log_probs",
    "output_log_probs",
    "context_logits",
    "generation_logits",
    "batch_index",
    "sequence_index",
    "kv_cache_alloc_new_blocks",
    "kv_cache_reused_blocks",
    "kv_cache_alloc_total_blocks",
    "arrival_time_ns",
    "first_scheduled_time_ns",
    "first_token_time_ns",
    "last_token_time_ns",
    "acceptance_rate",
    "total_accepted_draft_tokens",
    "total_draft_tokens",
)


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(self.model_config)
        self.llm = param(self.model_config, "tensorrt_llm_model_name", "tensorrt_llm")
        self.draft_llm = param(self.model_config, "tensorrt_llm_draft_model_name") or None
        self.accumulate = flag(self.model_config, "accumulate_tokens", False)
        self.outputs = {o["name"] for o in self.model_config["output"]}

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                self._one(request, sender)
            except Exception as exc:
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )

    def _one(self, request, sender):
        def get(name):
            return pb_utils.get_input_tensor_by_name(request, name)

        draft_tokens = get("num_draft_tokens")
        if draft_tokens is not None and int(draft_tokens.as_numpy().reshape(-1)[0]) > 0:
            raise ValueError(
                f"num_draft_tokens: the draft/verify loop with {self.draft_llm or 'a draft model'} is not "
                "emulated by the CPU stand-in (no draft_input_ids path); send the request without it"
            )
        stream = get("stream")
        streaming = bool(stream is not None and stream.as_numpy().reshape(-1)[0])
        if streaming and not self.decoupled:
            raise ValueError("stream=true needs the decoupled tensorrt_llm_bls model")
        pre_inputs = [
            pb_utils.Tensor(dst, get(src).as_numpy()) for src, dst in TO_PRE.items() if get(src) is not None
        ]
        pre = pb_utils.InferenceRequest(
            model_name="preprocessing", requested_output_names=list(PRE_TO_LLM), inputs=pre_inputs
        ).exec()
        if pre.has_error():
            raise ValueError(f"preprocessing: {pre.error().message()}")
        llm_inputs = [
            pb_utils.Tensor(dst, pb_utils.get_output_tensor_by_name(pre, src).as_numpy())
            for src, dst in PRE_TO_LLM.items()
            if pb_utils.get_output_tensor_by_name(pre, src) is not None
        ]
        for src, dst in TO_LLM.items():
            t = get(src)
            if t is not None:
                llm_inputs.append(pb_utils.Tensor(dst, t.as_numpy().reshape(1, -1)))
        wanted = ["output_ids", "sequence_length", *[o for o in PASS_THROUGH if o in self.outputs]]
        llm_request = pb_utils.InferenceRequest(
            model_name=self.llm, requested_output_names=wanted, inputs=llm_inputs
        )
        tokens_so_far = None
        responses = llm_request.exec(decoupled=True) if self.decoupled else [llm_request.exec()]
        last = None
        for response in responses:
            if response.has_error():
                raise ValueError(f"{self.llm}: {response.error().message()}")
            ids = pb_utils.get_output_tensor_by_name(response, "output_ids")
            if ids is None:  # the final, empty response of a decoupled stream
                continue
            tokens = ids.as_numpy()
            lengths = pb_utils.get_output_tensor_by_name(response, "sequence_length").as_numpy()
            if self.accumulate and streaming:
                tokens_so_far = (
                    tokens if tokens_so_far is None else np.concatenate([tokens_so_far, tokens], axis=-1)
                )
                tokens, lengths = tokens_so_far, np.array([[tokens_so_far.shape[-1]]], np.int32)
            post = pb_utils.InferenceRequest(
                model_name="postprocessing",
                requested_output_names=["OUTPUT"],
                inputs=[pb_utils.Tensor("TOKENS_BATCH", tokens), pb_utils.Tensor("SEQUENCE_LENGTH", lengths)],
            ).exec()
            if post.has_error():
                raise ValueError(f"postprocessing: {post.error().message()}")
            out = [
                pb_utils.Tensor("text_output", pb_utils.get_output_tensor_by_name(post, "OUTPUT").as_numpy())
            ]
            for name in PASS_THROUGH:
                t = pb_utils.get_output_tensor_by_name(response, name)
                if t is not None and name in self.outputs:
                    out.append(pb_utils.Tensor(name, t.as_numpy()))
            last = pb_utils.InferenceResponse(output_tensors=out)
            if streaming:
                sender.send(last)
                last = None
        if last is not None:
            sender.send(last, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        else:
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
