"""The builder Job starts on the stock NVIDIA images the examples name (issue 26 item 1).

Every example names ``nvcr.io/nvidia/tritonserver:<yy.mm>-trtllm-python-py3``, which has no
``engine-builder``. The operator delivers it: an init container copies the bundle (built by
``hack/build-builder-bundle.sh``, the script operator/Dockerfile runs) onto an emptyDir, and the
builder container runs ``python3 -m engine_builder`` with the bundle on ``PYTHONPATH``.

These tests render the Job for each example, then run the rendered commands against a directory laid
out like that image: a venv whose ``bin/`` is first on ``PATH`` (triton-inference-server/
tensorrtllm_backend r26.03 ``dockerfile/Dockerfile.triton.trt_llm_backend``: ``python3.12 -m venv
/opt/venv-tritonserver``, ``ENV PATH="/opt/venv-tritonserver/bin:${PATH}"``, TensorRT-LLM
``pip3 install``-ed into it), whose site-packages see this project's third-party packages (torch,
pydantic, ...) but not engine-builder. Container paths are mapped onto host directories volume by
volume (the init container's and the builder's mount of the same emptyDir map to the same
directory); nothing else is changed in the rendered command or environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine_builder.contract import (
    BUNDLE_ENV,
    BUNDLE_LIB,
    BUNDLE_MOUNT,
    BUNDLE_SOURCE,
    STAGES,
    without_bundle,
)
from trtllm_operator.api import ENGINE_KIND
from trtllm_operator.api.wire import BUILDER_CONTAINER, CHECK_CONTAINER, DELIVERY_CONTAINER
from trtllm_operator.decide.engine_spec import PreparedEngine, prepare_engine
from trtllm_operator.render.builder_job import desired_builder_job
from trtllm_operator.settings import DEFAULT_DELIVERY_IMAGE, Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
STOCK_IMAGE_PREFIX = "nvcr.io/nvidia/tritonserver:"
OWNER = {"metadata": {"name": "x", "namespace": "ml", "uid": "uid"}}
#: The stock image's interpreter venv (tensorrtllm_backend r26.03 Dockerfile, above).
IMAGE_VENV = "opt/venv-tritonserver"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def _example_engines() -> list[tuple[str, dict[str, Any]]]:
    engines = []
    for path in EXAMPLES:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and doc["kind"] == ENGINE_KIND:
                engines.append((f"{path.stem}/{doc['metadata']['name']}", doc))
    return engines


ENGINES = _example_engines()


def _render(doc: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    prepared = prepare_engine(doc["metadata"]["name"], doc["spec"])
    assert isinstance(prepared, PreparedEngine), prepared
    return desired_builder_job(OWNER, prepared, settings)


def _uv() -> Path:
    """uv as hack/venv.sh installs it (the installer the bundle script is given here: offline, from
    the cache the project's virtualenv was installed from)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trtllm-operator"
    found = sorted(cache.glob("uv-*/bin/uv"))
    assert found, f"no uv under {cache}: run hack/venv.sh"
    return found[-1]


@pytest.fixture(scope="module")
def delivery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The delivery image's /opt/engine-builder, made by the script operator/Dockerfile runs."""
    dest = tmp_path_factory.mktemp("delivery-image") / "engine-builder"
    env = {**os.environ, "BUNDLE_PIP": f"{_uv()} pip install --offline --quiet --python {sys.executable}"}
    subprocess.run([str(ROOT / "hack" / "build-builder-bundle.sh"), str(dest)], check=True, env=env)
    return dest


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root directory laid out like the stock image: ``opt/venv-tritonserver/bin/python3`` whose
    site-packages reach this environment's third-party packages (stand-ins for the image's torch,
    pydantic, ...) by a plain path entry, so engine-builder's editable install (a ``.pth`` hook) is
    not seen."""
    root = tmp_path_factory.mktemp("stock-image")
    venv = root / IMAGE_VENV
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python3"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "image-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return root


class Pod:
    """One rendered builder pod run against host directories: container path → host path per volume."""

    def __init__(self, job: Mapping[str, Any], volumes: Mapping[str, Path], image: Path) -> None:
        self.pod = job["spec"]["template"]["spec"]
        self.volumes = volumes
        self.image = image

    def _mounts(self, container: Mapping[str, Any]) -> dict[str, Path]:
        return {
            m["mountPath"]: self.volumes[m["name"]]
            for m in container.get("volumeMounts", [])
            if m["name"] in self.volumes
        }

    def _map(self, value: str, mounts: Mapping[str, Path]) -> str:
        for path, host in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if value == path or value.startswith(path + "/"):
                return str(host) + value[len(path) :]
        return value

    def run(
        self,
        container: Mapping[str, Any],
        argv: Sequence[str],
        *,
        path: str,
        extra: Mapping[str, Path] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        mounts = {**self._mounts(container), **(extra or {})}
        env = {"PATH": path, "HOME": str(self.image / "root"), "LANG": "C.UTF-8"}
        for e in container.get("env", []):
            if "value" in e:
                env[e["name"]] = ":".join(self._map(p, mounts) for p in e["value"].split(":"))
        mapped = [self._map(a, mounts) for a in argv]
        for arg in mapped:  # every container path the command names must exist on this side
            assert not arg.startswith(("/opt/", "/etc/engine-builder")), f"unmapped container path {arg}"
        return subprocess.run(mapped, env=env, capture_output=True, text=True, timeout=300, check=False)


def _containers(job: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = job["spec"]["template"]["spec"]
    init, *check = pod["initContainers"]
    (main,) = pod["containers"]
    assert (init["name"], main["name"]) == (DELIVERY_CONTAINER, BUILDER_CONTAINER)
    # a pvc:// model's model check, from the delivery image: the operator image's own engine-builder
    # (operator/Dockerfile installs the distribution, whose console script is engine-builder)
    for c in check:
        assert (c["name"], c["image"], c["command"][0]) == (CHECK_CONTAINER, init["image"], "engine-builder")
        assert "./engine-builder" in (ROOT / "operator" / "Dockerfile").read_text()
    return init, main


def _entry(main: Mapping[str, Any]) -> list[str]:
    """The builder container's command up to its ``run`` subcommand (the entry point)."""
    command = list(main["command"])
    return command[: command.index("run")]


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """The Job's emptyDir, fresh for each pod."""
    path = tmp_path / "emptydir"
    path.mkdir()
    return path


def test_every_example_names_a_stock_image_without_engine_builder() -> None:
    """The premise: the examples' runtime images are the stock Triton TensorRT-LLM images."""
    assert len(ENGINES) >= 6
    for name, doc in ENGINES:
        assert doc["spec"]["runtime"]["image"].startswith(STOCK_IMAGE_PREFIX), name


@pytest.mark.parametrize(("name", "doc"), ENGINES, ids=[n for n, _ in ENGINES])
def test_the_rendered_builder_entry_point_resolves_on_the_stock_image(
    name: str, doc: dict[str, Any], delivery: Path, image: Path, shared: Path
) -> None:
    job = _render(doc, Settings())
    init, main = _containers(job)
    assert main["image"] == doc["spec"]["runtime"]["image"]
    assert init["image"] == DEFAULT_DELIVERY_IMAGE
    volume = next(m["name"] for m in init["volumeMounts"] if m["mountPath"] == BUNDLE_MOUNT)
    assert {"name": volume, "mountPath": BUNDLE_MOUNT, "readOnly": True} in main["volumeMounts"]
    assert any(v["name"] == volume and "emptyDir" in v for v in job["spec"]["template"]["spec"]["volumes"])
    pod = Pod(job, {volume: shared}, image)
    image_path = f"{image / IMAGE_VENV / 'bin'}:{SYSTEM_PATH}"

    # The init container, in the delivery image (its /opt/engine-builder = the bundle built above).
    copied = pod.run(init, init["command"], path=SYSTEM_PATH, extra={BUNDLE_SOURCE: delivery})
    assert copied.returncode == 0, copied.stderr
    assert (shared / "lib" / "engine_builder" / "__main__.py").is_file()

    # The builder container, in the stock image: its entry point with the cheapest subcommands.
    entry = _entry(main)
    assert entry[0] == "python3", entry
    stages = pod.run(main, [*entry, "stages"], path=image_path)
    assert stages.returncode == 0, stages.stdout + stages.stderr
    for stage in STAGES:
        assert stage in stages.stdout
    helped = pod.run(main, [*entry, "run", "--help"], path=image_path)
    assert helped.returncode == 0, helped.stderr
    assert "--workdir" in helped.stdout
    # ... and what ran is the delivered copy, with the image's interpreter.
    where = pod.run(
        main,
        [
            "python3",
            "-c",
            "import sys, engine_builder; print(sys.prefix, engine_builder.__file__, sys.flags.safe_path)",
        ],
        path=image_path,
    )
    prefix, module, safe_path = where.stdout.split()
    assert Path(prefix) == image / IMAGE_VENV, where.stdout
    assert Path(module).is_relative_to(shared / "lib"), where.stdout
    assert safe_path == "True"  # the image's working directory (/app) is not first on the path


def test_without_delivery_the_stock_image_has_no_builder(image: Path, shared: Path) -> None:
    """Negative cases: a Job with delivery off (today's Job) runs ``engine-builder`` — not in the image;
    and the delivered entry point fails when the init container has not filled the volume."""
    name, doc = ENGINES[0]
    (main,) = _render(doc, Settings(builder_delivery=False))["spec"]["template"]["spec"]["containers"]
    assert main["command"][0] == "engine-builder", name
    pod = Pod({"spec": {"template": {"spec": {}}}}, {}, image)
    image_path = f"{image / IMAGE_VENV / 'bin'}:{SYSTEM_PATH}"
    missing = pod.run(main, ["sh", "-c", 'exec "$@"', "sh", main["command"][0], "stages"], path=image_path)
    assert missing.returncode == 127 and "not found" in missing.stderr, missing

    job = _render(doc, Settings())
    init, delivered = _containers(job)
    volume = next(m["name"] for m in init["volumeMounts"])
    empty = Pod(job, {volume: shared}, image)  # the init container never ran
    failed = empty.run(delivered, [*_entry(delivered), "stages"], path=image_path)
    assert failed.returncode != 0
    assert "No module named engine_builder" in failed.stderr, failed.stderr


def test_the_bundle_carries_no_framework_of_its_own(delivery: Path) -> None:
    """The image's torch, transformers and TensorRT-LLM must be the ones imported: the bundle holds
    engine-builder and bundle-requirements.txt only (installed without dependencies)."""
    top = {p.name for p in (delivery / "lib").iterdir() if not p.name.endswith(".dist-info")}
    assert {"engine_builder", "modelopt", "boto3"} <= top
    for framework in ("torch", "transformers", "tensorrt", "tensorrt_llm", "pydantic", "numpy", "yaml"):
        assert framework not in top
    assert not (delivery / "lib" / "bin").exists()


def test_trtllm_build_runs_without_the_bundle_on_its_path() -> None:
    """The delivered ModelOpt (0.47) shadows the image's (~0.37, TensorRT-LLM's pin) in the builder
    only; the tools it starts see the image's own packages."""
    env = {"PYTHONPATH": f"{BUNDLE_LIB}:/extra", BUNDLE_ENV: BUNDLE_LIB, "HOME": "/root"}
    assert without_bundle(env) == {"PYTHONPATH": "/extra", BUNDLE_ENV: BUNDLE_LIB, "HOME": "/root"}
    assert "PYTHONPATH" not in without_bundle({"PYTHONPATH": BUNDLE_LIB, BUNDLE_ENV: BUNDLE_LIB})
    assert without_bundle({"PYTHONPATH": "/extra"}) == {"PYTHONPATH": "/extra"}


def test_a_builder_image_with_engine_builder_can_turn_delivery_off() -> None:
    _, doc = ENGINES[0]
    job = _render(
        doc, Settings(builder_image="registry.example/engine-builder:1.2.0", builder_delivery=False)
    )
    pod = job["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    (main,) = pod["containers"]
    assert main["image"] == "registry.example/engine-builder:1.2.0"
    assert main["command"][:2] == ["engine-builder", "run"]
    assert not {e["name"] for e in main["env"]} & {"PYTHONPATH", BUNDLE_ENV}
    assert not any(m["mountPath"] == BUNDLE_MOUNT for m in main["volumeMounts"])


def test_the_default_delivery_image_is_the_image_the_chart_deploys() -> None:
    chart = yaml.safe_load((ROOT / "charts/trtllm-operator/Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "charts/trtllm-operator/values.yaml").read_text())
    chart_image = f"{values['image']['repository']}:{chart['appVersion']}"
    assert chart_image == DEFAULT_DELIVERY_IMAGE
    delivery = {k: values["builder"][k] for k in ("image", "delivery", "deliveryImage")}
    assert delivery == {"image": "", "delivery": True, "deliveryImage": ""}
