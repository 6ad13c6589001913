"""The model-repository ConfigMap: the Triton configuration files and the launch script, packed.

The files are settled before rendering
(:func:`trtllm_operator.decide.triton_config.model_repository_files`: server settings → Triton's
parameters → ``config.pbtxt`` / ``model.yaml`` texts, refused when a setting is out of range or a
``${…}`` is left); this module packs them with the pods' scripts (:mod:`trtllm_operator.render.launch`).

The ConfigMap is **immutable and content-addressed** (``<deployment>-repo-<hash>``), like a
Kustomize ``configMapGenerator``: a change of server settings or engine creates a new ConfigMap and a
new pod template, so the Deployment rolls; pods of the old ReplicaSet keep reading the files they
were started with even if they restart mid-rollout. The handler prunes ConfigMaps no pod template
references any more.

ConfigMap keys cannot contain ``/``; a repository path ``tensorrt_llm/config.pbtxt`` is stored under
the key ``tensorrt_llm__config.pbtxt`` and mounted back at its path through the volume's ``items``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trtllm_operator.api.wire import COMPONENT_MODEL_REPOSITORY, LABEL_COMPONENT
from trtllm_operator.decide.serving_params import ServingParams
from trtllm_operator.decide.triton_config import model_repository_files
from trtllm_operator.render.launch import launch_files
from trtllm_operator.render.serving import (
    child_name,
    common_labels,
    content_hash,
    metadata,
)


def configmap_key(path: str) -> str:
    """ConfigMap key for a repository-relative path: ``a/b/c.pbtxt`` → ``a__b__c.pbtxt``."""
    return path.replace("/", "__")


def configmap_data(params: ServingParams, files: Mapping[str, str]) -> dict[str, str]:
    """``data`` of the ConfigMap: every repository file plus the pods' scripts
    (:func:`trtllm_operator.render.launch.launch_files`: ``launch.sh``; ``worker.sh`` and
    ``rank-env.sh`` for a multi-node replica)."""
    data = {configmap_key(path): text for path, text in files.items()}
    data.update(launch_files(params, sorted({path.split("/", 1)[0] for path in files})))
    return data


def configmap_name(params: ServingParams, data: Mapping[str, str]) -> str:
    return child_name(params.name, f"repo-{content_hash(dict(data))[:10]}")


def desired_model_repository(params: ServingParams, files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The immutable ConfigMap holding the repository files and the launch script.

    ``files`` (``{relative path: text}``, settled) defaults to
    :func:`~trtllm_operator.decide.triton_config.model_repository_files` of ``params``, which raises
    ``ValueError`` when a file would still contain ``${…}`` or a server setting is out of range.
    """
    data = configmap_data(params, model_repository_files(params) if files is None else files)
    labels = {**common_labels(params), LABEL_COMPONENT: COMPONENT_MODEL_REPOSITORY}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(params, configmap_name(params, data), labels),
        "immutable": True,
        "data": data,
    }


def volume_items(configmap: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``items`` of the pod's ConfigMap volume: each file back at ``model-repository/<path>``, the
    scripts (``*.sh``, ``verify-artifact.py``: keys without ``__``, which every repository file's
    key holds) at the volume's top."""
    items = []
    for key in sorted(configmap["data"]):
        if "__" not in key:
            items.append({"key": key, "path": key, "mode": 0o555})
        else:
            items.append({"key": key, "path": "model-repository/" + key.replace("__", "/")})
    return items
