"""trtllm_operator.handlers."""
