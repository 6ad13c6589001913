"""A Triton Inference Server metrics emulator for tests and the demo.

It serves Triton's real ``/metrics`` families (TensorRT-LLM backend and Triton core, names, labels
and HELP as in reference ``tensorrt-llm.md`` §5) from a load model (:mod:`.model`), one endpoint
per emulated pod, bound to that pod's address on the metrics port — so the operator scrapes kwok
pods exactly as it scrapes real Triton pods, and a real Prometheus can scrape them too.

Run it (``docs/autoscaling.md`` has the full reference)::

    python -m trtllm_operator.emulator --bind 127.1.0.5 --port 8002 --control-port 9400
    curl -X PUT localhost:9400/load -d '{"arrivalRate": 30}'
    curl 127.1.0.5:8002/metrics

or in-process: ``with Fleet() as fleet: fleet.add("127.1.0.5"); fleet.set_control(Control(30.0))``.
"""

from trtllm_operator.emulator.model import Control, ReplicaState, ServingProfile
from trtllm_operator.emulator.server import ControlServer, Fleet, LoadFileWatcher, PodFollower

__all__ = [
    "Control",
    "ControlServer",
    "Fleet",
    "LoadFileWatcher",
    "PodFollower",
    "ReplicaState",
    "ServingProfile",
]
