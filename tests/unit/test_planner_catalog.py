"""GPU catalog: GFD product names, driver-reported memory, SM and FP8/FP4 flags, user extensions."""

from __future__ import annotations

import pytest

from engine_builder.planner import DEFAULT_CATALOG, PlanInputError, load_catalog_extension, lookup
from engine_builder.planner.catalog import EXTENSION_FIELD

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("product", "mib", "sm"),
    [
        ("NVIDIA-A10G", 23028, 86),
        ("NVIDIA-L4", 23034, 89),
        ("NVIDIA-L40S", 46068, 89),
        ("NVIDIA-A100-PCIE-40GB", 40960, 80),
        ("NVIDIA-A100-SXM4-40GB", 40960, 80),
        ("NVIDIA-A100-80GB-PCIe", 81920, 80),
        ("NVIDIA-A100-SXM4-80GB", 81920, 80),
        ("NVIDIA-H100-PCIe", 81559, 90),
        ("NVIDIA-H100-80GB-HBM3", 81559, 90),
        ("NVIDIA-H200", 143771, 90),
        ("NVIDIA-B200", 183359, 100),
        ("NVIDIA-GB200", 189471, 100),
    ],
)
def test_required_products(product: str, mib: int, sm: int) -> None:
    gpu = lookup(product)
    assert (gpu.product, gpu.memory_bytes, gpu.sm) == (product, mib * MIB, sm)
    assert gpu.fp8 is (sm >= 89)
    assert gpu.fp4 is (sm >= 100)


@pytest.mark.parametrize(
    ("name", "product"),
    [
        ("NVIDIA H200", "NVIDIA-H200"),  # NVML name (nvidia-smi), spaces
        ("nvidia-h100-80gb-hbm3", "NVIDIA-H100-80GB-HBM3"),  # case
        ("NVIDIA-H100-80GB-HBM3-SHARED", "NVIDIA-H100-80GB-HBM3"),  # GFD time-slicing suffix
        ("H100", "NVIDIA-H100-80GB-HBM3"),
        ("H200", "NVIDIA-H200"),
        ("B200", "NVIDIA-B200"),
        ("a100-40gb", "NVIDIA-A100-SXM4-40GB"),
    ],
)
def test_lookup_accepts_label_variants(name: str, product: str) -> None:
    assert lookup(name).product == product


def test_every_entry_is_consistent() -> None:
    for name, gpu in DEFAULT_CATALOG.items():
        assert name == gpu.product
        assert gpu.fp8 is (gpu.sm >= 89) and gpu.fp4 is (gpu.sm >= 100)
        assert gpu.memory_bytes % MIB == 0


def test_unknown_product_lists_known_ones() -> None:
    with pytest.raises(PlanInputError) as err:
        lookup("NVIDIA-RTX-9000")
    assert err.value.field == "spec.gpu.product"
    assert "NVIDIA-H200" in err.value.message
    # the fix names settings that exist (the operator's gpu_catalog_configmap / gpu_catalog_file, the
    # chart's settings.gpuCatalogConfigmap; tests/unit/test_engine_settings.py checks every
    # "operator setting X" against Settings), not the "gpuCatalog" no configuration has
    assert "operator setting gpuCatalogConfigmap" in err.value.message
    assert "gpuCatalogFile" in err.value.message and "settings.gpuCatalogConfigmap" in err.value.message


def test_mig_profile_is_refused_with_a_fix() -> None:
    with pytest.raises(PlanInputError) as err:
        lookup("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb")
    assert "MIG" in err.value.message and "catalog" in err.value.message


EXTENSION = """
gpus:
  - product: NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition
    memoryMiB: 97887
    sm: 120
  - product: NVIDIA-H200
    memoryBytes: 150000000000
    sm: 90
    memoryBandwidthBytesPerS: 4800000000000
"""


def test_extension_adds_and_overrides() -> None:
    extra = load_catalog_extension(EXTENSION)
    rtx = lookup("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", extra)
    assert (rtx.memory_bytes, rtx.sm, rtx.fp8, rtx.fp4) == (97887 * MIB, 120, True, True)
    assert lookup("NVIDIA-H200", extra).memory_bytes == 150_000_000_000
    assert lookup("NVIDIA-H200").memory_bytes == 143771 * MIB  # the built-in one is untouched


def test_extension_mapping_form() -> None:
    extra = load_catalog_extension({"NVIDIA-T4": {"memoryMiB": 15360, "sm": 75}})
    t4 = lookup("NVIDIA-T4", extra)
    assert (t4.sm, t4.fp8, t4.fp4) == (75, False, False)


@pytest.mark.parametrize(
    ("source", "field"),
    [
        ({"gpus": [{"product": "X", "memoryBytes": 1}]}, "gpus[0].sm"),
        ({"gpus": [{"product": "X", "sm": 90}]}, "gpus[0].memoryBytes"),
        ({"gpus": [{"product": "X", "sm": 90, "memoryBytes": 1, "colour": "green"}]}, "gpus[0].colour"),
        ({"gpus": "NVIDIA-H200"}, "gpus"),
        ("- just\n- a list\n", EXTENSION_FIELD),
        # Not YAML at all (a Markdown file passed by mistake).
        ("# Title\n\nA `code: span` here: and there\n  - x: [\n", EXTENSION_FIELD),
        ({"gpus": [{"product": "X", "sm": 90, "memoryMiB": "lots"}]}, "gpus[0].memoryMiB"),
        # fresh-user trial 52 #11: said as memoryBytes -1048576, a field and value nobody wrote
        ({"gpus": [{"product": "X", "sm": 90, "memoryMiB": -1}]}, "gpus[0].memoryMiB"),
        ({"gpus": [{"product": "X", "sm": "ninety", "memoryBytes": 1}]}, "gpus[0].sm"),
        ({"gpus": [{"product": "X", "sm": 90, "memoryBytes": -5}]}, "gpus[0].memoryBytes"),
        ({"gpus": [{"product": "X", "sm": 90, "memoryBytes": 1, "gpusPerNode": 0}]}, "gpus[0].gpusPerNode"),
        ({"gpus": [{"product": "X", "sm": 90, "memoryBytes": 1, "fp8": "yes"}]}, "gpus[0].fp8"),
        # Top-level typo: 'gpu' instead of 'gpus' is named as the unknown key.
        ({"gpu": [{"product": "X", "sm": 90, "memoryBytes": 1}]}, "gpu"),
        ({"gpus": [], "extra": 1}, "extra"),
    ],
)
def test_extension_errors_name_the_field(source: object, field: str) -> None:
    with pytest.raises(PlanInputError) as err:
        load_catalog_extension(source)  # type: ignore[arg-type]
    assert err.value.field == field


def test_unknown_key_error_lists_camel_case_keys() -> None:
    with pytest.raises(PlanInputError) as err:
        load_catalog_extension({"gpus": [{"product": "X", "sm": 90, "memoryBytes": 1, "memMiB": 2}]})
    assert "memoryMiB" in err.value.message and "gpusPerNode" in err.value.message
    assert "memory_bytes" not in err.value.message


@pytest.mark.parametrize(
    ("entry", "gpus_per_node"),
    [
        ({"product": "X", "sm": 90, "memoryMiB": 1000}, 8),
        ({"product": "X", "sm": 90, "memoryMiB": 1000, "gpusPerNode": 4}, 4),
        ({"product": "X", "sm": 90, "memoryMiB": 1000, "gpus_per_node": 2}, 2),
    ],
)
def test_extension_gpus_per_node(entry: dict[str, object], gpus_per_node: int) -> None:
    assert load_catalog_extension({"gpus": [entry]})["X"].gpus_per_node == gpus_per_node
