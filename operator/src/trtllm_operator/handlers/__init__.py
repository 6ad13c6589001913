"""kopf wiring: importing this package registers every handler of the operator.

Each controller is one module; add one import line per module. Handlers only fetch, call pure
code in ``render/`` and ``decide/``, and write through ``kube/``.
"""

from trtllm_operator.handlers import autoscaler as autoscaler
from trtllm_operator.handlers import deployment as deployment
from trtllm_operator.handlers import engine as engine
from trtllm_operator.handlers import startup as startup
from trtllm_operator.handlers import tuning as tuning
