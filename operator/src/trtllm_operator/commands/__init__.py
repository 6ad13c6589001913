"""trtllm_operator.commands."""
