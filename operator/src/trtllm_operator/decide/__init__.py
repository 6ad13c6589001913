"""trtllm_operator.decide."""
