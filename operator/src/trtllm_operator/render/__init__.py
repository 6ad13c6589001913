"""trtllm_operator.render."""
