"""The ``tensorrtllm`` backend as a Python-based Triton backend: a CPU stand-in for the TensorRT-LLM engine.

NOT the TensorRT-LLM backend. Triton 2.51 loads a ``backends/<name>/model.py`` as a Python-based
backend when no ``libtriton_<name>.so`` exists (python_backend README, "Python-based backends");
``hack/tritoncpu`` installs this file as ``backends/tensorrtllm/model.py``, so the unmodified
``tensorrt_llm/config.pbtxt`` the operator renders (``backend: "tensorrtllm"``) loads it.

What follows upstream (tensorrtllm_backend v0.19.0, commit c1e19638; the same code lives in
TensorRT-LLM ``triton_backend/``), and what does not:

* Tensors: the inputs and outputs ``config.pbtxt`` declares (``inflight_batcher_llm/tensorrt_llm``);
  ``output_ids`` ``[1, beam, tokens]`` with the prompt unless ``exclude_input_in_output``,
  ``sequence_length``, log probs, context/generation logits on request, per-request KV and timing
  outputs. Beam width and ``num_return_sequences`` above 1, LoRA, prompt tables, draft tokens,
  guided decoding and encoder-decoder inputs are refused with an error naming the input.
* Decoupled mode (``model_transaction_policy { decoupled: true }``): with ``streaming`` every
  generated token is one response with only the new tokens, then a final flag; without, one
  response. ``execute`` returns right after enqueueing (as the C++ backend does after
  ``enqueueRequests``), so Triton's pending count stays about 0. Non-decoupled: one response per
  request, sent through the response sender when the request finishes.
* Admission, batching and the paged KV-block pool: :mod:`standin_engine` (``max`` =
  ``max_batch_size`` × micro batches; GUARANTEED_NO_EVICT reservation; pool size from the plan and
  ``max_tokens_in_paged_kv_cache``).
* Metrics: a thread polls the executor's iteration stats every ``stats_check_period_ms`` (as
  ``WaitForStats`` does) and sets the families of ``custom_metrics_reporter.cc`` (v0.19.0) through
  ``pb_utils.MetricFamily`` with the same names and labels (``model``, ``version`` and the
  category label): ``nv_trt_llm_request_metrics{request_type=active|max|scheduled|context|waiting}``,
  ``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max|free|used|tokens_per|reused|fraction}``,
  ``nv_trt_llm_inflight_batcher_metrics``, ``nv_trt_llm_general_metrics``,
  ``nv_trt_llm_runtime_memory_metrics`` (cpu = this stub's RSS; gpu and pinned 0: no GPU).
  Not exported: the token-length histograms and disaggregated-serving counters.
* Tensor/pipeline-parallel ranks: the launch script starts one ``tritonserver`` per rank under
  ``mpirun``; rank 0 serves the whole model (every rank's shard, merged), ranks ≥ 1 stay in model
  initialisation for the life of the server, as the engine's worker ranks do in leader mode.
* The engine: ``gpt_model_path`` names the engine directory, which has no compiled engine here;
  the stand-in serves the TensorRT-LLM checkpoint next to it (``<artifact>/checkpoint``) and reads
  the build limits from ``<artifact>/manifest.json``.
"""

# ruff: noqa: PLR0917 - one callback per request closes over its request's state

from __future__ import annotations

import json
import os
import sys
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

UNSUPPORTED_INPUTS = (
    "encoder_input_features",
    "encoder_output_lengths",
    "draft_input_ids",
    "draft_logits",
    "prompt_embedding_table",
    "lora_task_id",
    "lora_weights",
    "lora_config",
    "guided_decoding_guide_type",
    "guided_decoding_guide",
    "context_phase_params",
)


def _param(model_config, key, default=None):
    value = (model_config.get("parameters") or {}).get(key, {}).get("string_value")
    if value is None or value == "" or value.startswith("${"):
        return default
    return value


def _bool(text, default=False):
    if text is None:
        return default
    return str(text).strip().lower() in ("true", "1", "yes", "y", "t")


def _scalar(request, name, default=None, kind=float):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    arr = tensor.as_numpy().reshape(-1)
    return default if arr.size == 0 else kind(arr[0])


def _words(request, name):
    """``[2, n]`` word list (flat ids, offsets padded with −1) → list of token lists."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return []
    arr = tensor.as_numpy().reshape(2, -1)
    ids, offsets = arr[0].tolist(), [o for o in arr[1].tolist() if o >= 0]
    out, start = [], 0
    for end in offsets:
        if end > start:
            out.append(ids[start:end])
        start = end
    return out


def _manifest_for(engine_parent):
    """The manifest describing the engine under ``engine_parent``: its ``manifest.json``, or for a
    draft engine (``<artifact>/draft/engine``, engine_builder.contract ``DRAFT_DIR``) the target
    artifact's manifest entry ``draft`` (which holds the draft's plan and compile command)."""
    path = os.path.join(engine_parent, "manifest.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    parent = os.path.join(os.path.dirname(engine_parent), "manifest.json")
    if os.path.isfile(parent):
        with open(parent, encoding="utf-8") as f:
            draft = json.load(f).get("draft") or {}
        if draft.get("dir") == os.path.basename(engine_parent):
            return draft
    return {}


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.model_name = args["model_name"]
        self.model_version = str(args["model_version"])
        rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
        if rank > 0:
            pb_utils.Logger.log_info(
                f"stand-in rank {rank}: the leader rank 0 serves every shard on the CPU; this rank stays "
                "in model initialisation like an engine worker rank (leader mode)"
            )
            threading.Event().wait()
        import standin_engine as se  # noqa: PLC0415 - torch loads after the rank check

        self.se = se
        mc = self.model_config
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(mc)
        self.exclude_input_default = _bool(_param(mc, "exclude_input_in_output"), False)
        self.stats_period = int(_param(mc, "stats_check_period_ms", "100")) / 1000.0
        self.cancel_period = int(_param(mc, "cancellation_check_period_ms", "100")) / 1000.0
        engine_dir = _param(mc, "gpt_model_path")
        if not engine_dir:
            raise pb_utils.TritonModelException("parameter gpt_model_path is not set")
        artifact = os.path.dirname(os.path.normpath(engine_dir))
        checkpoint = os.path.join(artifact, "checkpoint")
        if not os.path.isdir(checkpoint):
            raise pb_utils.TritonModelException(
                f"{checkpoint}: no TensorRT-LLM checkpoint next to gpt_model_path {engine_dir}; "
                "the CPU stand-in "
                "serves the builder's checkpoint (a compiled engine needs the GPU backend)"
            )
        manifest = _manifest_for(artifact)
        limits = se.engine_limits_from_manifest(manifest)
        t0 = time.monotonic()
        weights = se.load_checkpoint(checkpoint)
        cfg = weights.config
        tokens_per_block = limits.get("tokens_per_block", 32)
        kv_tokens = _param(mc, "max_tokens_in_paged_kv_cache")
        blocks = se.kv_pool_blocks(
            tokens_per_block=tokens_per_block,
            plan_max_kv_tokens=limits.get("max_kv_tokens"),
            max_tokens_in_paged_kv_cache=int(kv_tokens) if kv_tokens else None,
        )
        max_batch = limits.get("max_batch_size") or int(mc.get("max_batch_size") or 1)
        self.pool = se.BlockPool(blocks, tokens_per_block)
        policy = (_param(mc, "batch_scheduler_policy", "guaranteed_no_evict") or "").lower()
        self.executor = se.Executor(
            weights,
            self.pool,
            max_batch_size=max_batch,
            max_num_active=se.max_num_active_requests(max_batch, cfg.pp_size),
            max_num_tokens=limits.get("max_num_tokens"),
            max_seq_len=limits.get("max_seq_len"),
            policy=policy,
            log=pb_utils.Logger.log_error,
        )
        self.logits_np = {}
        for name in ("context_logits", "generation_logits"):
            out = pb_utils.get_output_config_by_name(mc, name)
            if out:
                self.logits_np[name] = pb_utils.triton_string_to_numpy(out["data_type"])
        self.output_names = {o["name"] for o in mc.get("output", [])}
        pb_utils.Logger.log_info(
            f"{se.STANDIN_DESCRIPTION}. Model {self.model_name}: {weights.source}; loaded in "
            f"{time.monotonic() - t0:.2f} s; max_batch_size {max_batch}, max active requests "
            f"{self.executor.max_num_active}, KV pool {blocks} blocks × {tokens_per_block} tokens "
            f"(policy {policy}), decoupled {self.decoupled}"
        )
        self._init_metrics()
        self._stop = threading.Event()
        self._metrics_thread = threading.Thread(target=self._metrics_loop, daemon=True)
        self._metrics_thread.start()

    # -- metrics ----------------------------------------------------------------------------------
    def _family(self, name, description, category, labels):
        family = pb_utils.MetricFamily(name=name, description=description, kind=pb_utils.MetricFamily.GAUGE)
        base = {"model": self.model_name, "version": self.model_version}
        return family, {label: family.Metric(labels={**base, category: label}) for label in labels}

    def _init_metrics(self):
        # Names, descriptions, category labels and sub-labels: custom_metrics_reporter.cc (v0.19.0).
        self.families = {
            "request": self._family(
                "nv_trt_llm_request_metrics",
                "TRT LLM request metrics",
                "request_type",
                ("active", "max", "scheduled", "context", "waiting"),
            ),
            "memory": self._family(
                "nv_trt_llm_runtime_memory_metrics",
                "TRT LLM runtime memory metrics",
                "memory_type",
                ("cpu", "gpu", "pinned"),
            ),
            "kv": self._family(
                "nv_trt_llm_kv_cache_block_metrics",
                "TRT LLM KV cache block metrics",
                "kv_cache_block_type",
                ("max", "free", "used", "tokens_per", "reused", "fraction"),
            ),
            "ifb": self._family(
                "nv_trt_llm_inflight_batcher_metrics",
                "TRT LLM inflight_batcher-specific metrics",
                "inflight_batcher_specific_metric",
                ("total_context_tokens", "generation_requests", "micro_batch_id", "paused_requests"),
            ),
            "general": self._family(
                "nv_trt_llm_general_metrics",
                "General TRT LLM metrics",
                "general_type",
                ("timestamp", "iteration_counter"),
            ),
        }

    def _rss_bytes(self):
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0

    def _metrics_loop(self):
        while not self._stop.wait(self.stats_period):
            s = self.executor.stats
            values = {
                "request": {
                    "active": s.active,
                    "max": s.max_active,
                    "scheduled": s.scheduled,
                    "context": s.context,
                    "waiting": s.waiting,
                },
                "memory": {"cpu": self._rss_bytes(), "gpu": 0, "pinned": 0},
                "kv": {
                    "max": s.kv_max,
                    "free": s.kv_free,
                    "used": s.kv_used,
                    "tokens_per": s.kv_tokens_per_block,
                    "reused": s.kv_reused,
                    "fraction": s.kv_fraction,
                },
                "ifb": {
                    "total_context_tokens": s.context_tokens,
                    "generation_requests": s.generation,
                    "micro_batch_id": 0,
                    "paused_requests": s.paused,
                },
                # Timestamp: microseconds since the epoch (convertTimestampToMicroseconds).
                "general": {"timestamp": int(s.timestamp * 1e6), "iteration_counter": s.iteration},
            }
            for group, per_label in values.items():
                metrics = self.families[group][1]
                for label, value in per_label.items():
                    metrics[label].set(float(value))

    # -- requests ---------------------------------------------------------------------------------
    def _parse(self, request):
        for name in UNSUPPORTED_INPUTS:
            if pb_utils.get_input_tensor_by_name(request, name) is not None:
                raise ValueError(
                    f"input {name!r} is not supported by the CPU stand-in of the TensorRT-LLM engine"
                )
        beam = _scalar(request, "beam_width", 1, int)
        if beam != 1:
            raise ValueError(f"beam_width {beam}: the CPU stand-in decodes with beam width 1 only")
        n = _scalar(request, "num_return_sequences", 1, int)
        if n != 1:
            raise ValueError(f"num_return_sequences {n}: the CPU stand-in returns one sequence")
        ids_t = pb_utils.get_input_tensor_by_name(request, "input_ids")
        if ids_t is None:
            raise ValueError("input_ids is required (the stand-in serves decoder-only models)")
        ids = ids_t.as_numpy().reshape(-1).astype(np.int64)
        length = _scalar(request, "input_lengths", len(ids), int)
        prompt = ids[:length].tolist()
        bias_t = pb_utils.get_input_tensor_by_name(request, "embedding_bias")
        bias = None
        if bias_t is not None and bias_t.as_numpy().size:
            import torch  # noqa: PLC0415

            bias = torch.from_numpy(bias_t.as_numpy().reshape(-1).astype(np.float32))
        sampling = self.se.SamplingConfig(
            max_new_tokens=_scalar(request, "request_output_len", 16, int),
            end_id=_scalar(request, "end_id", None, int),
            pad_id=_scalar(request, "pad_id", None, int),
            top_k=_scalar(request, "runtime_top_k", 0, int),
            top_p=_scalar(request, "runtime_top_p", 0.0, float),
            temperature=_scalar(request, "temperature", 1.0, float),
            seed=_scalar(request, "seed", None, int),
            min_tokens=_scalar(request, "min_tokens", 0, int),
            stop_words=_words(request, "stop_words_list"),
            bad_words=_words(request, "bad_words_list"),
            embedding_bias=bias,
            return_log_probs=_scalar(request, "return_log_probs", False, bool),
            return_context_logits=_scalar(request, "return_context_logits", False, bool),
            return_generation_logits=_scalar(request, "return_generation_logits", False, bool),
        )
        streaming = _scalar(request, "streaming", False, bool)
        if streaming and not self.decoupled:
            raise ValueError(
                "streaming=true needs a decoupled model (model_transaction_policy { decoupled: true })"
            )
        exclude = _scalar(request, "exclude_input_in_output", self.exclude_input_default, bool)
        return prompt, sampling, streaming, exclude

    def _tensors(self, request_names, prompt, result, streaming, exclude):
        tokens = result.new_tokens if streaming else ([] if exclude else prompt) + result.all_output_tokens
        n_out = len(result.new_tokens) if streaming else len(result.all_output_tokens)
        logprobs = result.log_probs[-n_out:] if n_out else []
        values = {
            "output_ids": np.array([[tokens]], dtype=np.int32),
            "sequence_length": np.array([[len(tokens)]], dtype=np.int32),
            "cum_log_probs": np.array([[float(sum(result.log_probs))]], dtype=np.float32),
            "output_log_probs": np.array([[logprobs]], dtype=np.float32).reshape(1, 1, -1),
            "batch_index": np.zeros((1, 1), np.int32),
            "sequence_index": np.zeros((1, 1), np.int32),
            "context_phase_params": np.zeros((1, 0), np.uint8),
            "kv_cache_alloc_new_blocks": np.array([[result.kv_blocks]], np.int32),
            "kv_cache_reused_blocks": np.zeros((1, 1), np.int32),
            "kv_cache_alloc_total_blocks": np.array([[result.kv_blocks]], np.int32),
            "arrival_time_ns": np.array([[result.arrival_ns]], np.int64),
            "first_scheduled_time_ns": np.array([[result.first_scheduled_ns]], np.int64),
            "first_token_time_ns": np.array([[result.first_token_ns]], np.int64),
            "last_token_time_ns": np.array([[result.last_token_ns]], np.int64),
            "acceptance_rate": np.zeros((1, 1), np.float32),
            "total_accepted_draft_tokens": np.zeros((1, 1), np.int32),
            "total_draft_tokens": np.zeros((1, 1), np.int32),
            "num_input_tokens": np.array([[len(prompt)]], np.int32),
            "num_output_tokens": np.array([[len(result.all_output_tokens)]], np.int32),
        }
        ctx_dtype = self.logits_np.get("context_logits", np.float32)
        gen_dtype = self.logits_np.get("generation_logits", np.float32)
        if result.context_logits is not None and not (streaming and len(result.all_output_tokens) > 1):
            values["context_logits"] = result.context_logits.numpy().astype(ctx_dtype)[None]
        else:
            values["context_logits"] = np.zeros((1, 1, 1), ctx_dtype)
        if result.generation_logits:
            gl = result.generation_logits[-n_out:] if streaming else result.generation_logits
            values["generation_logits"] = np.stack([g.numpy() for g in gl])[None, None].astype(gen_dtype)
        else:
            values["generation_logits"] = np.zeros((1, 1, 1, 1), gen_dtype)
        wanted = set(request_names) & self.output_names if request_names else self.output_names
        return [pb_utils.Tensor(name, values[name]) for name in sorted(wanted) if name in values]

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                prompt, sampling, streaming, exclude = self._parse(request)
                problem = self.executor.validate(prompt, sampling)
                if problem:
                    raise ValueError(problem)
            except (ValueError, TypeError) as exc:
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            names = list(request.requested_output_names())
            self._track(request, sender, names, prompt, sampling, streaming, exclude)

    def _track(self, request, sender, names, prompt, sampling, streaming, exclude):
        # A request's response factory is freed once its final response is sent: checking
        # is_cancelled() after that crashes the server, so the final send and the check share a lock.
        lock = threading.Lock()
        state = {"done": False}

        def on_result(result):
            if result.error:
                response = pb_utils.InferenceResponse(error=pb_utils.TritonError(result.error))
            else:
                response = pb_utils.InferenceResponse(
                    output_tensors=self._tensors(names, prompt, result, streaming, exclude)
                )
            if not result.finished and not result.error:
                sender.send(response)
                return
            with lock:
                state["done"] = True
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

        req = self.executor.submit(prompt, sampling, streaming, on_result)

        # The C++ backend polls cancellations every cancellation_check_period_ms.
        def watch():
            while True:
                time.sleep(self.cancel_period)
                with lock:
                    if state["done"]:
                        return
                    if request.is_cancelled():
                        self.executor.cancel(req)
                        return

        threading.Thread(target=watch, daemon=True).start()

    def finalize(self):
        if hasattr(self, "_stop"):
            self._stop.set()
        if hasattr(self, "executor"):
            self.executor.shutdown()
