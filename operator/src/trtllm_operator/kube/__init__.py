"""trtllm_operator.kube."""
