"""GPU catalog: memory as the driver reports it, SM version, FP8/FP4 support, and datasheet speeds.

Keys are the product names GPU Feature Discovery (GFD) writes into the ``nvidia.com/gpu.product``
node label: the NVML device name with spaces replaced by ``-`` (``NVIDIA H100 80GB HBM3`` →
``NVIDIA-H100-80GB-HBM3``). GFD appends ``-SHARED`` under time-slicing and ``-MIG-<profile>`` for MIG
devices; :func:`lookup` strips ``-SHARED`` and refuses MIG profiles (their memory is a fraction of
the card — add them with :func:`load_catalog_extension`).

Sources:

* ``memory_bytes``: the ``memory.total`` nvidia-smi prints (MiB × 1,048,576), i.e. what
  NVML reports as total, not the marketing GB. (CUDA's ``cudaMemGetInfo`` total is lower: 615 MiB
  lower on an H200; the planner's runtime reserve covers that.) H200 143771 MiB and the name
  ``NVIDIA H200`` were read with nvidia-smi on this project's H200 machine (driver 580.159.04,
  2026-11-29); public nvidia-smi logs show the same for H200 and H200 NVL, and B200 183359 MiB,
  GB200 189471 MiB (stored logs found with the ``find_string`` tool); the others are the commonly printed
  values for those boards (A10G 23028, L4 23034, L40S 46068, A100 40 GB 40960, A100 80 GB 81920,
  H100 80 GB 81559, H100 NVL 95830 MiB) **[from memory of public nvidia-smi output; not re-checked
  here — extend or override the catalog if your driver prints another number]**.
* ``sm``: CUDA compute capability × 10 (NVIDIA CUDA GPUs page): Ampere A100 80, A10G 86,
  Ada L4/L40S 89, Hopper 90, Blackwell B200/GB200 100.
* ``fp8``: SM ≥ 89 (TensorRT-LLM support matrix, reference §1.2); ``fp4``: SM ≥ 100 (NVFP4 tensor
  cores are Blackwell-only).
* ``memory_bandwidth_bytes_per_s`` and dense (no sparsity) tensor-core TFLOPS: NVIDIA product
  datasheets (A100, H100, H200, L4, L40S; HGX B200 and GB200 NVL72 per-GPU figures = system figure
  / GPUs, halved for the sparsity the datasheets quote). A10G: AWS states 600 GB/s; its tensor
  TFLOPS are not in a datasheet, left as ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import yaml

from engine_builder.planner.errors import PlanInputError

MIB = 1024 * 1024

#: Where a catalog extension comes from, in the fix of an unknown-product message: the operator's
#: settings (``gpu_catalog_configmap`` / ``gpu_catalog_file``, written camelCase as the operator's
#: messages name settings; the chart's ``settings.gpuCatalogConfigmap``) and the plan command's flag.
EXTENSION_SOURCES = (
    "operator setting gpuCatalogConfigmap (a ConfigMap in the operator's namespace; chart value "
    "settings.gpuCatalogConfigmap) or gpuCatalogFile; trtllm-operator plan --gpu-catalog FILE"
)
#: :class:`PlanInputError` field of an extension that is not a catalog as a whole (not YAML, not a
#: mapping): the document, whichever setting or flag named it.
EXTENSION_FIELD = "GPU catalog extension"


@dataclass(frozen=True)
class GPUSpec:
    """One GPU product.

    ``memory_bytes``: total device memory as the driver reports it (bytes). ``sm``: compute
    capability × 10. ``fp8`` / ``fp4``: tensor-core support for FP8 (SM 89+) / NVFP4 (SM 100+).
    Optional datasheet numbers for the simulator: ``memory_bandwidth_bytes_per_s``,
    ``fp16_dense_tflops``, ``fp8_dense_tflops``, ``fp4_dense_tflops``. ``gpus_per_node``: GPUs in one
    typical node (HGX: 8; GB200 compute tray: 4) — informative, the planner's rule uses the
    request's ``gpus_per_node``.
    """

    product: str
    memory_bytes: int
    sm: int
    fp8: bool
    fp4: bool
    memory_bandwidth_bytes_per_s: int | None = None
    fp16_dense_tflops: float | None = None
    fp8_dense_tflops: float | None = None
    fp4_dense_tflops: float | None = None
    gpus_per_node: int = 8

    @property
    def architecture(self) -> str:
        """Marketing architecture name from the SM: Ampere, Ada, Hopper, Blackwell."""
        if self.sm >= 100:
            return "Blackwell"
        if self.sm >= 90:
            return "Hopper"
        if self.sm >= 89:
            return "Ada"
        if self.sm >= 80:
            return "Ampere"
        return f"SM{self.sm}"


def _gpu(
    product: str,
    mib: int,
    sm: int,
    *,
    bw_gbs: float | None,
    fp16: float | None,
    fp8: float | None = None,
    fp4: float | None = None,
    gpus_per_node: int = 8,
) -> GPUSpec:
    return GPUSpec(
        product=product,
        memory_bytes=mib * MIB,
        sm=sm,
        fp8=sm >= 89,
        fp4=sm >= 100,
        memory_bandwidth_bytes_per_s=int(bw_gbs * 1e9) if bw_gbs is not None else None,
        fp16_dense_tflops=fp16,
        fp8_dense_tflops=fp8,
        fp4_dense_tflops=fp4,
        gpus_per_node=gpus_per_node,
    )


#: Built-in catalog, keyed by GFD product name. See the module docstring for sources.
DEFAULT_CATALOG: Mapping[str, GPUSpec] = {
    g.product: g
    for g in (
        _gpu("NVIDIA-A10G", 23028, 86, bw_gbs=600, fp16=None),
        _gpu("NVIDIA-L4", 23034, 89, bw_gbs=300, fp16=121, fp8=242.5),
        _gpu("NVIDIA-L40S", 46068, 89, bw_gbs=864, fp16=362.05, fp8=733),
        _gpu("NVIDIA-A100-PCIE-40GB", 40960, 80, bw_gbs=1555, fp16=312),
        _gpu("NVIDIA-A100-SXM4-40GB", 40960, 80, bw_gbs=1555, fp16=312),
        _gpu("NVIDIA-A100-80GB-PCIe", 81920, 80, bw_gbs=1935, fp16=312),
        _gpu("NVIDIA-A100-SXM4-80GB", 81920, 80, bw_gbs=2039, fp16=312),
        _gpu("NVIDIA-H100-PCIe", 81559, 90, bw_gbs=2000, fp16=756, fp8=1513),
        _gpu("NVIDIA-H100-80GB-HBM3", 81559, 90, bw_gbs=3350, fp16=989, fp8=1979),
        _gpu("NVIDIA-H100-NVL", 95830, 90, bw_gbs=3900, fp16=835, fp8=1671),
        _gpu("NVIDIA-H200", 143771, 90, bw_gbs=4800, fp16=989, fp8=1979),
        _gpu("NVIDIA-H200-NVL", 143771, 90, bw_gbs=4800, fp16=835, fp8=1671),
        _gpu("NVIDIA-B200", 183359, 100, bw_gbs=8000, fp16=2250, fp8=4500, fp4=9000),
        _gpu("NVIDIA-GB200", 189471, 100, bw_gbs=8000, fp16=2500, fp8=5000, fp4=10000, gpus_per_node=4),
    )
}

#: Short names accepted by :func:`lookup` (CLI convenience) → GFD product name.
ALIASES: Mapping[str, str] = {
    "A10G": "NVIDIA-A10G",
    "L4": "NVIDIA-L4",
    "L40S": "NVIDIA-L40S",
    "A100-40GB": "NVIDIA-A100-SXM4-40GB",
    "A100": "NVIDIA-A100-SXM4-80GB",
    "A100-80GB": "NVIDIA-A100-SXM4-80GB",
    "H100": "NVIDIA-H100-80GB-HBM3",
    "H100-SXM": "NVIDIA-H100-80GB-HBM3",
    "H100-PCIE": "NVIDIA-H100-PCIe",
    "H100-NVL": "NVIDIA-H100-NVL",
    "H200": "NVIDIA-H200",
    "H200-141GB-HBM3E": "NVIDIA-H200",
    "H200-NVL": "NVIDIA-H200-NVL",
    "B200": "NVIDIA-B200",
    "GB200": "NVIDIA-GB200",
}


def _normalise(product: str) -> str:
    return "-".join(product.strip().split()).upper()


def lookup(product: str, extra: Mapping[str, GPUSpec] | None = None) -> GPUSpec:
    """The :class:`GPUSpec` for a GFD product name (or a short alias such as ``H200``).

    ``extra`` entries (from :func:`load_catalog_extension`) override the built-in ones. Matching is
    case-insensitive, treats spaces as ``-`` (so NVML names work too) and ignores GFD's ``-SHARED``
    suffix. Raises :class:`PlanInputError` (field ``spec.gpu.product``) for an unknown product or a
    MIG profile, listing the known products.
    """
    catalog: dict[str, GPUSpec] = dict(DEFAULT_CATALOG)
    if extra:
        catalog.update(extra)
    by_norm = {_normalise(k): v for k, v in catalog.items()}
    name = _normalise(product or "")
    if name.endswith("-SHARED"):
        name = name[: -len("-SHARED")]
    if "-MIG-" in name and name not in by_norm:
        raise PlanInputError(
            "spec.gpu.product",
            f"{product!r} is a MIG profile; the planner has no memory figure for it. Add it to the GPU "
            f"catalog extension ({EXTENSION_SOURCES}) with its memoryBytes and sm.",
        )
    if name in by_norm:
        return by_norm[name]
    for prefix in ("", "NVIDIA-"):
        alias = name[len(prefix) :] if prefix and name.startswith(prefix) else name
        target = {k.upper(): v for k, v in ALIASES.items()}.get(alias)
        if target is not None and _normalise(target) in by_norm:
            return by_norm[_normalise(target)]
    raise PlanInputError(
        "spec.gpu.product",
        f"unknown GPU product {product!r}; known products: {', '.join(sorted(catalog))}. Use the "
        "nvidia.com/gpu.product label value of your nodes, or add the GPU to the catalog extension "
        f"({EXTENSION_SOURCES}).",
    )


_FIELD_NAMES = {
    "memoryBytes": "memory_bytes",
    "memoryBandwidthBytesPerS": "memory_bandwidth_bytes_per_s",
    "fp16DenseTflops": "fp16_dense_tflops",
    "fp8DenseTflops": "fp8_dense_tflops",
    "fp4DenseTflops": "fp4_dense_tflops",
    "gpusPerNode": "gpus_per_node",
}


#: snake_case field → the camelCase key the docs show (error messages list these).
_CAMEL = {v: k for k, v in _FIELD_NAMES.items()}


def load_catalog_extension(source: str | Mapping[str, Any] | None) -> dict[str, GPUSpec]:
    """Parse a user catalog extension (YAML text or an already-parsed mapping) into GPU specs.

    Accepted shapes (camelCase or snake_case keys)::

        gpus:
          - product: NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition
            memoryBytes: 102642810880     # or memoryMiB: 97887
            sm: 120
            fp8: true                     # optional, default sm >= 89
            fp4: true                     # optional, default sm >= 100
            gpusPerNode: 4                # optional, default 8

    or a mapping ``{product: {memoryBytes: ..., sm: ...}}``. Raises :class:`PlanInputError` whose
    field is the path inside the extension (``gpus[0].sm``) for a missing or invalid value, an
    unknown key (allowed keys listed in camelCase), or text that is not YAML (field
    :data:`EXTENSION_FIELD`).
    """
    if source is None:
        return {}
    try:
        data: Any = yaml.safe_load(source) if isinstance(source, str) else source
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise PlanInputError(
            EXTENSION_FIELD, f"not valid YAML ({reason}); expected a mapping with a 'gpus' list"
        ) from exc
    if data is None:
        return {}
    entries: list[tuple[str, Any]] = []
    if isinstance(data, Mapping) and "gpus" in data:
        extra_keys = sorted(str(k) for k in data if k != "gpus")
        if extra_keys:
            raise PlanInputError(extra_keys[0], "unknown top-level key; the only one allowed is 'gpus'")
        gpus = data["gpus"]
        if not isinstance(gpus, list):
            raise PlanInputError("gpus", "must be a list of GPU entries")
        for i, item in enumerate(gpus):
            entries.append((f"gpus[{i}]", item))
    elif isinstance(data, Mapping):
        for key, item in data.items():
            if isinstance(item, list):
                raise PlanInputError(
                    str(key),
                    "unknown top-level key holding a list; did you mean 'gpus'? (or use "
                    "'PRODUCT: {memoryBytes: ..., sm: ...}' entries)",
                )
            if not isinstance(item, Mapping):
                raise PlanInputError(str(key), "must be a mapping with memoryBytes and sm")
            entries.append((str(key), {"product": key, **item}))
    else:
        raise PlanInputError(EXTENSION_FIELD, "expected a mapping (YAML object) with a 'gpus' list")
    out: dict[str, GPUSpec] = {}
    allowed = {f.name for f in fields(GPUSpec)}
    shown_allowed = sorted({_CAMEL.get(k, k) for k in allowed} | {"memoryMiB"})
    for path, item in entries:
        if not isinstance(item, Mapping):
            raise PlanInputError(path, "must be a mapping with product, memoryBytes and sm")
        norm = {_FIELD_NAMES.get(str(k), str(k)): v for k, v in item.items()}
        for mib_key in ("memoryMiB", "memory_mib"):
            if mib_key in norm:
                mib = norm.pop(mib_key)
                if isinstance(mib, bool) or not isinstance(mib, int) or mib <= 0:
                    # said of the field as written, not of memoryBytes (fresh-user trial 52 #11)
                    raise PlanInputError(
                        f"{path}.{mib_key}", f"must be a positive integer (MiB), got {mib!r}"
                    )
                norm["memory_bytes"] = mib * MIB
        unknown = set(norm) - allowed
        if unknown:
            bad = sorted(unknown)[0]
            raise PlanInputError(f"{path}.{bad}", f"unknown key; allowed: {shown_allowed}")
        for key in ("product", "memory_bytes", "sm"):
            if key not in norm:
                raise PlanInputError(f"{path}.{_CAMEL.get(key, key)}", "required")
        for key in ("memory_bytes", "sm", "gpus_per_node"):
            value = norm.get(key, 1)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise PlanInputError(
                    f"{path}.{_CAMEL.get(key, key)}", f"must be a positive integer, got {value!r}"
                )
        for key in ("fp8", "fp4"):
            if key in norm and not isinstance(norm[key], bool):
                raise PlanInputError(f"{path}.{key}", f"must be true or false, got {norm[key]!r}")
        for key in (
            "memory_bandwidth_bytes_per_s",
            "fp16_dense_tflops",
            "fp8_dense_tflops",
            "fp4_dense_tflops",
        ):
            value = norm.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
            ):
                raise PlanInputError(
                    f"{path}.{_CAMEL.get(key, key)}", f"must be a positive number, got {value!r}"
                )
        sm = norm["sm"]
        norm.setdefault("fp8", sm >= 89)
        norm.setdefault("fp4", sm >= 100)
        spec = GPUSpec(**norm)
        out[spec.product] = replace(spec, product=str(spec.product))
    return out
