"""The runtime-image catalog: which TensorRT-LLM and TensorRT an NVIDIA serving image carries. Pure.

An engine loads only on the TensorRT build that compiled it, and a checkpoint format only on a
TensorRT-LLM that knows it (audit A9, A10). The builder records the versions it built with (read from
the installed libraries: ``manifest.json`` ``versions``, the report's ``versions``, the LLMEngine's
``status.artifact``); this catalog says what a *serving* image carries, so the operator can compare
the two before it rolls anything out (:func:`trtllm_operator.decide.compatibility.engine_incompatibilities`)
and refuse a format the runtime cannot load (:func:`trtllm_operator.decide.engine_spec.prepare_engine`).

Sources:

* ``nvcr.io/nvidia/tritonserver:<yy.mm>-trtllm-python-py3``: Triton's release compatibility matrix,
  triton-inference-server/server ``docs/introduction/compatibility.md`` (stored commit 0f963c9a),
  "Container Name: trtllm-python-py3" — TensorRT and TensorRT-LLM version per release, 24.04–26.07
  (docs/reference/tensorrt-llm.md §6 reproduces it).
* ``nvcr.io/nvidia/tensorrt-llm/release:<version>``: the tag is the TensorRT-LLM version (TensorRT-LLM
  installation guide, ``docker pull nvcr.io/nvidia/tensorrt-llm/release:<version>``); its TensorRT is
  not published per tag, so it is unknown here (``None``) and not compared.

An image outside the catalog (a private build, a mirror under another name, a digest-only reference)
has unknown versions: nothing is refused on its account. A digest suffix is ignored for the lookup
(``name:tag@sha256:…`` is the tag's image, pinned).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRITON_TRTLLM_REPOSITORY = "nvcr.io/nvidia/tritonserver"
TRITON_TRTLLM_SUFFIX = "-trtllm-python-py3"
TRTLLM_RELEASE_REPOSITORY = "nvcr.io/nvidia/tensorrt-llm/release"

#: Triton release (``yy.mm``) → (TensorRT-LLM, TensorRT), triton-inference-server/server
#: ``docs/introduction/compatibility.md`` @0f963c9a, container ``trtllm-python-py3``.
TRITON_TRTLLM_RELEASES: dict[str, tuple[str, str]] = {
    "26.07": ("1.2.1", "10.14.1.48"),
    "26.06": ("1.2.1", "10.14.1.48"),
    "26.05": ("1.2.1", "10.14.1.48"),
    "26.04": ("1.2.1", "10.14.1.48"),
    "26.03": ("1.2.0", "10.14.1.48"),
    "26.02": ("1.1.0", "10.13.3.9"),
    "26.01": ("1.1.0", "10.13.3.9"),
    "25.12": ("1.1.0", "10.13.3.9"),
    "25.11": ("1.0.3.2510", "10.13.3.9"),
    "25.10": ("1.0.0", "10.11.0.33"),
    "25.09": ("1.0.0", "10.11.0.33"),
    "25.08": ("0.21.0", "10.11.0.33"),
    "25.07": ("0.20.0", "10.10.0.31"),
    "25.06": ("0.20.0", "10.10.0.31"),
    "25.05": ("0.19.0", "10.9.0.34"),
    "25.04": ("0.18.2", "10.9.0.34"),
    "25.03": ("0.18.0", "10.9.0.34"),
    "25.02": ("0.17.0.post1", "10.8.0.43"),
    "25.01": ("0.17.0", "10.8.0.43"),
    "24.12": ("0.16.0", "10.7.0"),
    "24.11": ("0.15.0", "10.6.0"),
    "24.10": ("0.14.0", "10.4.0"),
    "24.09": ("0.13.0", "10.4.0"),
    "24.08": ("0.12.0", "10.3.0"),
    "24.07": ("0.11.0", "10.1.0"),
    "24.06": ("0.10.0", "10.0.1"),
    "24.05": ("0.9.0", "10.0.1.6"),
    "24.04": ("0.9.0", "9.3.0.post12.dev1"),
}

_VERSION_TAG = re.compile(r"^\d+\.\d+\.\d+[0-9A-Za-z.]*$")


@dataclass(frozen=True)
class RuntimeVersions:
    """What an image carries: ``tensorrt_llm`` and ``tensorrt`` versions (``None``: not known) and
    ``source``, where the catalog took them from."""

    tensorrt_llm: str | None
    tensorrt: str | None
    source: str

    def describe(self) -> str:
        """``TensorRT-LLM 1.2.0 / TensorRT 10.14.1.48`` (unknown parts left out)."""
        parts = []
        if self.tensorrt_llm:
            parts.append(f"TensorRT-LLM {self.tensorrt_llm}")
        if self.tensorrt:
            parts.append(f"TensorRT {self.tensorrt}")
        return " / ".join(parts) or "unknown versions"


def image_versions(image: str) -> RuntimeVersions | None:
    """The catalog entry of ``image`` (a reference as written in a spec), or ``None`` when the image
    is not an NVIDIA image the catalog knows."""
    ref = image.strip().split("@", 1)[0]
    name, _, tag = ref.rpartition(":")
    if not name or "/" in tag:
        return None
    if name == TRITON_TRTLLM_REPOSITORY and tag.endswith(TRITON_TRTLLM_SUFFIX):
        release = tag[: -len(TRITON_TRTLLM_SUFFIX)]
        known = TRITON_TRTLLM_RELEASES.get(release)
        if known is None:
            return None
        return RuntimeVersions(
            known[0],
            known[1],
            f"Triton {release} release compatibility matrix (docs/introduction/compatibility.md)",
        )
    if name == TRTLLM_RELEASE_REPOSITORY and _VERSION_TAG.match(tag):
        return RuntimeVersions(tag, None, "the image tag (nvcr.io/nvidia/tensorrt-llm/release:<version>)")
    return None
