"""The HPA (``mode: hpa``) or KEDA ScaledObject (``mode: keda``) of an LLMDeployment: one home for the
operator's handler (:func:`trtllm_operator.handlers.autoscaler.sync_external_autoscaler`) and
``trtllm-operator render``, so both print / apply the same object from the same inputs."""

from __future__ import annotations

from typing import Any

from trtllm_operator.api.deployment import AutoscalingSpec
from trtllm_operator.decide.autoscaler import decide_external
from trtllm_operator.decide.autoscaling import refuse_retired_targets, refuse_scale_to_zero
from trtllm_operator.decide.serving_params import OwnerRef
from trtllm_operator.render.hpa import desired_hpa
from trtllm_operator.render.keda import desired_scaled_object

__all__ = ["desired_external_autoscaler"]


def desired_external_autoscaler(
    name: str, namespace: str, owner: OwnerRef, spec: AutoscalingSpec
) -> dict[str, Any] | None:
    """The child ``spec.autoscaling`` asks for (:func:`~trtllm_operator.decide.autoscaler.decide_external`):
    the HorizontalPodAutoscaler in mode hpa, the ScaledObject in mode keda, ``None`` otherwise (mode
    builtin, or autoscaling disabled).

    Raises ``ValueError`` naming the field for a spec the mode cannot render (the operator's
    ``ScalingActive=False`` ``InvalidSpec``): scale to zero where refused, a retired target, an unset
    ``maxReplicas`` / target / (keda) ``metrics.prometheusURL``.
    """
    mode = decide_external(spec).render
    if mode is None:
        return None
    refuse_scale_to_zero(spec)
    refuse_retired_targets(spec)
    if mode == "hpa":
        return desired_hpa(name, namespace, owner, spec)
    return desired_scaled_object(name, namespace, owner, spec)
