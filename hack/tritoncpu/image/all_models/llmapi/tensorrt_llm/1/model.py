"""Stand-in for the image's LLM-API model (TensorRT-LLM ``triton_backend/all_models/llmapi/
tensorrt_llm/1/model.py``): a CPU stand-in for the PyTorch-backend engine, NOT TensorRT-LLM.

The real model builds ``tensorrt_llm.LLM(**model.yaml)`` (the PyTorch backend on GPUs), which
cannot run here. This one, written for trtllm-operator, keeps what Triton and a client see of it
(tensorrtllm_backend v0.19.0, commit c1e19638, ``all_models/llmapi/tensorrt_llm/1/model.py`` and
``helpers.py``):

* ``model.yaml`` next to this file (or ``$LLM_CONFIG_PATH``) is read the same way: the LLM
  arguments (``model``: the unified checkpoint; ``max_batch_size``, ``max_num_tokens``,
  ``max_seq_len``, ``kv_cache_config.max_tokens``, ``scheduler_config.capacity_scheduler_policy``)
  and ``triton_config.decoupled``, which — as upstream — decides whether responses are streamed,
  whatever ``config.pbtxt`` says (audit A4: the rendered config.pbtxt must declare it too);
* inputs ``text_input`` (one prompt), ``streaming``, ``sampling_param_*`` (``max_tokens`` default
  32, ``temperature``, ``top_k``, ``top_p``, ``seed``, ``stop``, ``exclude_input_from_output``),
  ``return_finish_reason`` / ``return_stop_reason`` / ``return_cumulative_logprob``;
* outputs ``text_output`` (the generated text, cumulative while streaming, as ``CompletionOutput.text``),
  and ``finish_reason`` / ``stop_reason`` / ``cumulative_logprob`` when asked;
* no ``nv_trt_llm_*`` metric families (the upstream LLM-API model exports none; Triton's core
  metrics are real);
* every response through the response sender, ``execute`` returning at once.

Engine: :mod:`standin_engine` over the unified checkpoint (dequantized), tokens per KV block 32
(the LLM API's ``KvCacheConfig`` default), pool size from ``kv_cache_config.max_tokens`` and the
artifact's plan.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _scalar(request, name, default=None, kind=float):
    t = pb_utils.get_input_tensor_by_name(request, name)
    if t is None:
        return default
    arr = t.as_numpy().reshape(-1)
    return default if arr.size == 0 else kind(arr[0])


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
        if rank > 0:
            pb_utils.Logger.log_info(
                f"stand-in rank {rank}: waiting for the leader, as upstream's non-zero ranks do"
            )
            threading.Event().wait()
        import standin_engine as se  # noqa: PLC0415 - torch loads after the rank check
        from transformers import AutoTokenizer  # noqa: PLC0415

        self.se = se
        path = os.environ.get("LLM_CONFIG_PATH") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "model.yaml"
        )
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
        self.decoupled = bool((doc.get("triton_config") or {}).get("decoupled", False))
        checkpoint = doc.get("model")
        if not checkpoint or not os.path.isdir(checkpoint):
            raise pb_utils.TritonModelException(f"model.yaml: model {checkpoint!r} is not a directory")
        self.tokenizer = AutoTokenizer.from_pretrained(doc.get("tokenizer") or checkpoint)
        manifest_path = os.path.join(os.path.dirname(os.path.normpath(checkpoint)), "manifest.json")
        manifest = {}
        if os.path.isfile(manifest_path):
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
        limits = se.engine_limits_from_manifest(manifest)
        t0 = time.monotonic()
        weights = se.load_checkpoint(checkpoint)
        kv = doc.get("kv_cache_config") or {}
        tokens_per_block = int(kv.get("tokens_per_block") or 32)
        blocks = se.kv_pool_blocks(
            tokens_per_block=tokens_per_block,
            plan_max_kv_tokens=limits.get("max_kv_tokens"),
            max_tokens_in_paged_kv_cache=kv.get("max_tokens"),
        )
        max_batch = int(doc.get("max_batch_size") or limits.get("max_batch_size") or 2048)
        policy = str(
            (doc.get("scheduler_config") or {}).get("capacity_scheduler_policy", "GUARANTEED_NO_EVICT")
        ).lower()
        self.pool = se.BlockPool(blocks, tokens_per_block)
        self.executor = se.Executor(
            weights,
            self.pool,
            max_batch_size=max_batch,
            max_num_active=se.max_num_active_requests(max_batch, int(doc.get("pipeline_parallel_size") or 1)),
            max_num_tokens=doc.get("max_num_tokens") or limits.get("max_num_tokens"),
            max_seq_len=doc.get("max_seq_len") or limits.get("max_seq_len"),
            policy=policy,
            log=pb_utils.Logger.log_error,
        )
        self.output_dtype = {
            o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in self.model_config["output"]
        }
        pb_utils.Logger.log_info(
            f"{se.STANDIN_DESCRIPTION} (LLM-API model). {weights.source}; "
            f"loaded in {time.monotonic() - t0:.2f} s; "
            f"max_batch_size {max_batch}, KV pool {blocks} blocks × {tokens_per_block} tokens, decoupled "
            f"(model.yaml triton_config) {self.decoupled}"
        )

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                self._submit(request, sender)
            except (ValueError, TypeError, pb_utils.TritonModelException) as exc:
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )

    def _submit(self, request, sender):
        text = pb_utils.get_input_tensor_by_name(request, "text_input")
        if text is None:
            raise ValueError("text_input is missing from the request")
        arr = text.as_numpy().reshape(-1)
        prompt_text = arr[0].decode("utf-8") if isinstance(arr[0], bytes) else str(arr[0])
        streaming = _scalar(request, "streaming", False, bool)
        if streaming and not self.decoupled:
            raise ValueError("Streaming is only supported in decoupled mode.")
        prompt = self.tokenizer.encode(prompt_text)
        stop_t = pb_utils.get_input_tensor_by_name(request, "sampling_param_stop")
        stop_words = []
        if stop_t is not None:
            for s in stop_t.as_numpy().reshape(-1):
                ids = self.tokenizer.encode(
                    s.decode() if isinstance(s, bytes) else str(s), add_special_tokens=False
                )
                if ids:
                    stop_words.append(ids)
        sampling = self.se.SamplingConfig(
            max_new_tokens=_scalar(request, "sampling_param_max_tokens", 32, int),
            end_id=self.tokenizer.eos_token_id,
            top_k=_scalar(request, "sampling_param_top_k", 0, int),
            top_p=_scalar(request, "sampling_param_top_p", 0.0, float),
            temperature=_scalar(request, "sampling_param_temperature", 1.0, float),
            seed=_scalar(request, "sampling_param_seed", None, int),
            stop_words=stop_words,
        )
        problem = self.executor.validate(prompt, sampling)
        if problem:
            raise ValueError(problem)
        want = {
            "finish_reason": _scalar(request, "return_finish_reason", False, bool),
            "stop_reason": _scalar(request, "return_stop_reason", False, bool),
            "cumulative_logprob": _scalar(request, "return_cumulative_logprob", False, bool),
        }
        max_tokens = sampling.max_new_tokens

        def on_result(result):
            if result.error:
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(result.error)),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                return
            generated = self.tokenizer.decode(result.all_output_tokens, skip_special_tokens=True)
            out = [
                pb_utils.Tensor(
                    "text_output",
                    np.asarray([generated.encode("utf-8")], dtype=self.output_dtype["text_output"]),
                )
            ]
            if result.finished:
                reason = "length" if len(result.all_output_tokens) >= max_tokens else "stop"
                extra = {
                    "finish_reason": reason,
                    "stop_reason": "None",
                    "cumulative_logprob": sum(result.log_probs),
                }
                for name, wanted in want.items():
                    if wanted and name in self.output_dtype:
                        dtype = self.output_dtype[name]
                        value = str(extra[name]).encode() if dtype == np.object_ else extra[name]
                        out.append(pb_utils.Tensor(name, np.asarray([value], dtype=dtype)))
            flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if result.finished else 0
            sender.send(pb_utils.InferenceResponse(output_tensors=out), flags=flags)

        self.executor.submit(prompt, sampling, streaming, on_result)

    def finalize(self):
        if hasattr(self, "executor"):
            self.executor.shutdown()
