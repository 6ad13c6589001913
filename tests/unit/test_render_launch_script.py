"""launch.sh executed for real with fake ``tritonserver`` and ``mpirun`` programs on PATH.

Checks what the pod's main process does: assembles the model repository (model code from the
artifact or the image, the operator's config files on top), refuses an unfilled ``${…}``, execs
Triton for one rank, and for several ranks keeps ``mpirun`` in the foreground and stops the replica
when a rank exits (even with status 0).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from support.artifacts import write_manifest

from engine_builder.contract import EXIT_TAMPERED
from trtllm_operator.decide.serving_params import OwnerRef, ServingParams
from trtllm_operator.render.model_repository import desired_model_repository, volume_items

FAKE_TRITON = """#!/bin/bash
# Fake tritonserver: records its arguments; rank 1 exits 0 after RANK1_EXIT_AFTER seconds if set.
echo "$@" > "$LOGDIR/rank-$$.args"
case "$*" in *prefix1_*) if [ -n "${RANK1_EXIT_AFTER:-}" ]; then sleep "$RANK1_EXIT_AFTER"; exit 0; fi;; esac
[ -n "${EXIT_AT_ONCE:-}" ] && exit 0
while true; do sleep 0.2; done
"""

FAKE_MPIRUN = """#!/usr/bin/env python3
# Fake mpirun: one child per ':'-separated app context; like Open MPI, a non-zero exit ends the job.
import signal, subprocess, sys, time
args = sys.argv[1:]
while args and args[0] != "-n":
    args = args[2:] if args[0] == "--host" else args[1:]
contexts, cur = [], []
for a in args + [":"]:
    if a == ":":
        contexts.append(cur[2:]); cur = []
    else:
        cur.append(a)
procs = [subprocess.Popen(c) for c in contexts]
def stop(*_):
    for p in procs: p.terminate()
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
while True:
    codes = [p.poll() for p in procs]
    if any(c not in (None, 0) for c in codes):
        stop()
    if all(c is not None for c in codes):
        sys.exit(0)
    time.sleep(0.1)
"""


def params(**kw: object) -> ServingParams:
    base = ServingParams(
        name="llama",
        namespace="ns",
        owner=OwnerRef("llama", "u"),
        engine_name="e",
        engine_key="e" * 64,
        backend="tensorrt",
        image="img:1",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        artifact_claim="c",
        artifact_sub_path="k",
    )
    return replace(base, **kw)  # type: ignore[arg-type]


#: The pod's TRITON_ADMIN_KEY in these runs.
ADMIN_KEY = "0123abcd" * 8


def install(tmp: Path, p: ServingParams) -> tuple[Path, dict[str, str]]:
    """Lay out the pod's mounts under ``tmp`` and return (script, env)."""
    # The artifact carries model code for preprocessing only; the image has the rest.
    (tmp / "artifact/triton/preprocessing/1").mkdir(parents=True)
    (tmp / "artifact/triton/preprocessing/1/model.py").write_text("# from the artifact\n")
    (tmp / "artifact/engine").mkdir()
    (tmp / "artifact/engine/rank0.engine").write_bytes(b"engine bytes")
    # the engine's status.artifact.manifestDigest, which the operator renders into launch.sh
    cm = desired_model_repository(replace(p, manifest_digest=write_manifest(tmp / "artifact")))
    config = tmp / "config"
    for item in volume_items(cm):
        target = config / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(cm["data"][item["key"]])
    for m in ("preprocessing", "postprocessing", "tensorrt_llm", "tensorrt_llm_bls"):
        (tmp / f"app/inflight_batcher_llm/{m}/1").mkdir(parents=True)
        (tmp / f"app/inflight_batcher_llm/{m}/1/model.py").write_text("# from the image\n")
    (tmp / "app/inflight_batcher_llm/tensorrt_llm_bls/config.pbtxt").write_text("max_batch_size: ${x}\n")
    script = (config / "launch.sh").read_text()
    script = script.replace("--model-repository=/model-repository", f"--model-repository={tmp}/repo")
    script = script.replace("repo=/model-repository", f"repo={tmp}/repo")
    script = script.replace("/etc/trtllm-operator", str(config)).replace("/artifact", f"{tmp}/artifact")
    script = script.replace("/app/all_models", f"{tmp}/app")
    (tmp / "launch.sh").write_text(script)
    (tmp / "repo").mkdir()
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, text in (("tritonserver", FAKE_TRITON), ("mpirun", FAKE_MPIRUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    (tmp / "logs").mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "LOGDIR": str(tmp / "logs"),
        "TRITON_ADMIN_KEY": ADMIN_KEY,  # from the pod's Secret <name>-credentials
    }
    return tmp / "launch.sh", env


def test_single_rank_assembles_repository_and_execs_triton(tmp_path: Path) -> None:
    script, env = install(tmp_path, params())
    result = subprocess.run(
        ["bash", str(script)],
        env={**env, "EXIT_AT_ONCE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    repo = tmp_path / "repo"
    assert (repo / "preprocessing/1/model.py").read_text() == "# from the artifact\n"
    assert (repo / "postprocessing/1/model.py").read_text() == "# from the image\n"
    assert not (repo / "tensorrt_llm_bls").exists()  # never an unrendered template of the image
    assert 'key: "gpt_model_path"' in (repo / "tensorrt_llm/config.pbtxt").read_text()
    (args,) = [p.read_text() for p in (tmp_path / "logs").iterdir()]
    assert f"--model-repository={repo}" in args and "--http-port=8000" in args
    # the pod's admin key reaches Triton's restriction flags, expanded by the script
    restricted = f"shared-memory,model-repository,trace,logging:admin-key={ADMIN_KEY}"
    assert f"--http-restricted-api={restricted}" in args
    assert f"--grpc-restricted-protocol={restricted}" in args


def test_unfilled_placeholder_stops_the_pod(tmp_path: Path) -> None:
    script, env = install(tmp_path, params())
    config = tmp_path / "config/model-repository/tensorrt_llm/config.pbtxt"
    config.write_text(
        config.read_text() + 'parameters: { key: "x" value: { string_value: "${engine_dir}" } }\n'
    )
    result = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and "unfilled" in result.stderr
    assert list((tmp_path / "logs").iterdir()) == []  # Triton never started


def _tamper(artifact: Path, how: str) -> str:
    """Change the artifact ``how``; returns the path the verifier must name."""
    if how == "content":
        (artifact / "engine/rank0.engine").write_bytes(b"engine BYTES")  # same size, other bytes
        return "engine/rank0.engine"
    if how == "added":
        (artifact / "triton/postprocessing/1").mkdir(parents=True)
        (artifact / "triton/postprocessing/1/model.py").write_text("import os; os.system('id')\n")
        return "triton/postprocessing/1/model.py"
    if how == "symlink":
        (artifact / "engine/rank0.engine").unlink()
        (artifact / "engine/rank0.engine").symlink_to("/etc/passwd")
        return "engine/rank0.engine"
    if how == "missing":
        (artifact / "triton/preprocessing/1/model.py").unlink()
        return "triton/preprocessing/1/model.py"
    # a consistent manifest, rewritten by whoever changed the file: not the digest the engine recorded
    (artifact / "engine/rank0.engine").write_bytes(b"other engine")
    write_manifest(artifact)
    return "manifest.json"


@pytest.mark.parametrize("how", ["content", "added", "symlink", "missing", "manifest"])
@pytest.mark.parametrize("tp", [1, 2])
def test_tampered_artifact_stops_the_pod_before_triton_starts(tmp_path: Path, how: str, tp: int) -> None:
    script, env = install(tmp_path, params(tensor_parallelism=tp))
    bad = _tamper(tmp_path / "artifact", how)
    result = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == EXIT_TAMPERED, (result.stdout, result.stderr)
    assert result.stderr.strip().splitlines()[-1].startswith(f"ArtifactTampered: {bad}: ")
    assert list((tmp_path / "logs").iterdir()) == []  # Triton never started
    assert not (tmp_path / "repo/tensorrt_llm").exists()  # nothing of the artifact was copied


def test_launch_script_verifies_against_the_recorded_manifest_digest(tmp_path: Path) -> None:
    script, _ = install(tmp_path, params())
    digest = json.loads((tmp_path / "artifact/manifest.json").read_text())["manifestDigest"]
    lines = script.read_text().splitlines()
    verify = next(i for i, line in enumerate(lines) if "verify-artifact.py" in line)
    assert lines[verify].endswith(f"--manifest-digest {digest}")
    assert verify < next(i for i, line in enumerate(lines) if line.startswith("repo="))


def test_replica_stops_when_a_rank_exits_even_with_status_zero(tmp_path: Path) -> None:
    script, env = install(tmp_path, params(tensor_parallelism=2))
    # rank 0 (the fake tritonserver) never exits by itself: only the script's reaction to rank 1's
    # exit ends the replica, so a script that ignores it runs into the timeout (no wall-clock bound)
    try:
        result = subprocess.run(
            ["bash", str(script)],
            env={**env, "RANK1_EXIT_AFTER": "3"},
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the replica kept running after rank 1 exited: {exc.stderr!r}") from exc
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "a tritonserver rank exited (1 of 2 alive)" in result.stderr
    ranks = sorted(p.read_text() for p in (tmp_path / "logs").iterdir())
    assert len(ranks) == 2 and sum("--load-model=tensorrt_llm" in r for r in ranks) == 1
    alive = subprocess.run(["pgrep", "-f", str(tmp_path / "bin")], capture_output=True, check=False)
    assert alive.returncode == 1, "no rank may outlive the replica"


def test_sigterm_is_forwarded_to_every_rank(tmp_path: Path) -> None:
    script, env = install(tmp_path, params(tensor_parallelism=2))
    proc = subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while len(list((tmp_path / "logs").iterdir())) < 2:
        assert time.monotonic() < deadline, "ranks did not start"
        time.sleep(0.1)
    proc.terminate()
    assert proc.wait(timeout=30) != 0
    alive = subprocess.run(["pgrep", "-f", str(tmp_path / "bin")], capture_output=True, check=False)
    assert alive.returncode == 1, "no rank may outlive the replica"
