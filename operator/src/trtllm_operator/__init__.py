"""trtllm-operator: TensorRT-LLM engines and autoscaled Triton fleets on Kubernetes."""

__version__ = "0.1.0"
