"""The PodDisruptionBudget: voluntary disruptions (node drains) take at most one replica at a time.

``maxUnavailable: 1`` rather than ``minAvailable``: with one replica a drain can still proceed
(a ``minAvailable: 1`` budget would block node maintenance forever), and with many replicas a drain
never takes down more than a rollout would. For a LeaderWorkerSet the budget covers every pod of
the group; one evicted worker already takes its replica down.
"""

from __future__ import annotations

from typing import Any

from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.render.serving import child_name, metadata, selector_labels


def desired_pdb(params: ServingParams) -> dict[str, Any]:
    """``policy/v1`` PodDisruptionBudget ``<name>`` over the deployment's pods."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(params, child_name(params.name)),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector_labels(params)},
        },
    }
