"""trtllm_operator.metrics."""
