"""trtllm_operator.api."""
