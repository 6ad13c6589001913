"""engine-builder: the program a trtllm-operator builder Job runs, and the pure capacity planner.

This package never imports ``trtllm_operator``: it runs inside the TensorRT-LLM image.
"""

__version__ = "0.1.0"
