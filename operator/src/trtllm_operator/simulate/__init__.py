"""Offline autoscaling simulator: replay a request trace through modelled TensorRT-LLM replicas.

The simulator answers "what would this autoscaling policy have done to my traffic" before any GPU is
touched. It is a discrete-event simulation (``engine``) of Triton/TensorRT-LLM replicas with inflight
batching and the ``GUARANTEED_NO_EVICT`` KV-cache reservation (``replica``), an iteration-time model
calibrated to NVIDIA's published TensorRT-LLM throughput tables (``perf``), trace readers
(``traces``) and policies (``policies``): the operator's own autoscaling decision code plus the
baselines it is compared against. Everything here is pure Python with no I/O except the trace
readers and the report writers in ``report``.
"""
