"""The serving pods' main processes: bash scripts rendered into the model-repository ConfigMap.

Why scripts of our own: TensorRT-LLM's ``scripts/launch_triton_server.py`` starts ``mpirun`` with
``subprocess.Popen`` and returns without waiting (docs/reference/tensorrt-llm.md §4.4,
tensorrtllm_backend#580): as a container's main process the container would exit at once. We build
the same ``mpirun`` line (one ``tritonserver`` app context per rank, rank 0 serving every model,
ranks ≥ 1 loading only ``tensorrt_llm``; with ``trtllm-llmapi-launch`` in front of each rank for the
PyTorch backend on several nodes, as that script's ``--trtllm_llmapi_launch`` does) and keep it in
the foreground under a small watchdog.

**One node** (a Deployment pod): ``launch.sh`` assembles the model repository and runs
``tritonserver`` (one rank) or ``mpirun`` over the pod's ranks (:func:`launch_script`).

**Several nodes** (a LeaderWorkerSet group, :mod:`trtllm_operator.render.leaderworkerset`): Open MPI
starts the remote ranks over SSH. Three scripts:

* ``launch.sh`` on the leader (:func:`leader_script`): assemble the model repository; save the
  pod's environment; derive the group's host names from LWS's ``LWS_LEADER_ADDRESS``; **wait, with
  a deadline and a log line per worker, until every worker accepts an SSH login** (a worker starts
  ``sshd`` only after its own model repository is assembled, so a login means the worker is ready
  for its ranks); then ``mpirun`` over all hosts. LWS's own TensorRT-LLM example and Triton's
  multi-node tutorial wait for the workers before ``mpirun`` too (they poll ``kubectl get pods``;
  the pods here have no API access: ``automountServiceAccountToken: false``).
* ``worker.sh`` on every worker (:func:`worker_script`): assemble the same model repository — every
  TensorRT rank loads ``/model-repository`` — save the pod's environment, then ``sshd`` in the
  foreground (``/usr/sbin/sshd``: sshd refuses to re-exec from a relative path).
* ``rank-env.sh`` (:data:`RANK_ENV_SCRIPT`), in front of every rank: a process that ``sshd``
  starts gets sshd's fixed environment (OpenSSH sshd(8), "LOGIN PROCESS": ``USER``, ``HOME``,
  ``PATH`` as compiled in, …), not the image's ``ENV`` — the image's ``PATH`` to ``tritonserver``
  and ``trtllm-llmapi-launch``, its ``LD_LIBRARY_PATH`` for the TensorRT-LLM libraries, its
  ``NCCL_*``/``UCX_*`` settings. The wrapper loads the environment its own pod saved at start and
  ``exec``s the rank, so every rank runs with its pod's environment, as under ``kubectl exec``
  (the ``kubessh`` launch agent of the upstream examples).

``orted`` (Open MPI's daemon on each worker) is found through ``mpirun --prefix``: the Open MPI
install the leader's ``mpirun`` belongs to (the same image on every pod); Open MPI then sets
``PATH``/``LD_LIBRARY_PATH`` on the remote node before starting ``orted`` (Open MPI 4.1 mpirun(1),
``--prefix``). ``plm_rsh_no_tree_spawn``: the leader starts every ``orted`` itself, so workers
never need to SSH to each other.

SSH key: one ed25519 pair per LLMDeployment, in its Secret ``<name>-credentials``
(:mod:`trtllm_operator.render.credentials`), mounted at :data:`SSH_KEY_DIR`: ``ssh`` on the leader
uses ``id_ed25519``; ``sshd`` on the workers accepts only ``authorized_keys`` (a root-owned copy,
``AuthorizedKeysFile``), never a key baked into the image, and a worker without it stops (exit 2).
Host keys are generated per pod (``ssh-keygen -A``), so the leader does not pin them
(``StrictHostKeyChecking=no``); the NetworkPolicy admits the workers' SSH port only from pods of the
same deployment (:mod:`trtllm_operator.render.network_policy`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from importlib import resources

from engine_builder.contract import EXIT_TAMPERED
from trtllm_operator.decide.serving_params import (
    ARTIFACT_CHECKPOINT_DIR,
    ARTIFACT_MODEL_REPOSITORY,
    ARTIFACT_MOUNT,
    ServingParams,
)
from trtllm_operator.render.serving import (
    ADMIN_KEY_ENV,
    CONFIG_MOUNT,
    IMAGE_TEMPLATES,
    LAUNCH_SCRIPT,
    MODEL_REPOSITORY,
    TRTLLM_SERVE_MODEL_DIR,
    openai_frontend_args,
    tritonserver_args,
    trtllm_serve_args,
    trtllm_serve_model_name,
    uses_openai_frontend,
    uses_trtllm_serve,
)

#: The Triton models the operator renders per backend (engine_builder.triton's layouts).
MODELS = {
    "tensorrt": ("ensemble", "postprocessing", "preprocessing", "tensorrt_llm"),
    "pytorch": ("tensorrt_llm",),
}

#: ConfigMap keys of the multi-node scripts (``launch.sh`` is the leader's, as on one node).
WORKER_SCRIPT = "worker.sh"
RANK_ENV_SCRIPT = "rank-env.sh"
#: ConfigMap key of the artifact verifier every pod runs before it loads anything
#: (:mod:`engine_builder.artifact_check`, its source as is).
VERIFY_SCRIPT = "verify-artifact.py"

#: emptyDir of each multi-node pod where its start-up environment is saved for the ranks.
POD_ENV_DIR = "/run/trtllm-operator"
POD_ENV_FILE = f"{POD_ENV_DIR}/pod-env.sh"

#: sshd's port on the workers (OpenSSH's default).
SSH_PORT = 22
#: Where a per-deployment SSH key is mounted: ``id_ed25519`` (leader's client key) and
#: ``authorized_keys`` (workers). Not under :data:`CONFIG_MOUNT`, a read-only ConfigMap volume.
SSH_KEY_DIR = "/etc/trtllm-operator-ssh"
SSH_PRIVATE_KEY = f"{SSH_KEY_DIR}/id_ed25519"
SSH_AUTHORIZED_KEYS = f"{SSH_KEY_DIR}/authorized_keys"
#: Where a worker's ``sshd`` reads its copy of ``authorized_keys`` (made by ``worker.sh``).
SSHD_KEY_DIR = "/etc/ssh/trtllm-operator"
SSHD_AUTHORIZED_KEYS = f"{SSHD_KEY_DIR}/authorized_keys"

#: How long a leader waits for its workers to accept SSH before it gives up and exits (the
#: container restarts and LeaderWorkerSet recreates the group). Covers the workers' scheduling and
#: image pull, which run in parallel with the leader's (``startupPolicy: LeaderCreated``), and a
#: node that a cluster autoscaler has to add. The leader's startup probe budget includes it.
WORKER_WAIT_SECONDS = 900
#: Seconds between SSH attempts, and between "still waiting" log lines, while waiting.
WORKER_POLL_SECONDS = 5
WORKER_LOG_SECONDS = 30


def ssh_options(port: int = SSH_PORT) -> tuple[str, ...]:
    """``ssh`` options of the leader, for its readiness check and ``mpirun``'s ``plm_rsh_args``:
    never prompt, accept the workers' per-pod host keys without recording them, fail fast."""
    return (
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "LogLevel=ERROR",
        "-p",
        str(port),
    )


def verifier_source() -> str:
    """The text of :data:`VERIFY_SCRIPT`: :mod:`engine_builder.artifact_check`'s own source file
    (standard library only; an import-linter contract keeps it so)."""
    return resources.files("engine_builder").joinpath("artifact_check.py").read_text(encoding="utf-8")


def verify_lines(params: ServingParams) -> list[str]:
    """Bash lines verifying the artifact against its manifest before anything of it is read.

    ``python3 verify-artifact.py /artifact --manifest-digest <status.artifact.manifestDigest>``
    (:mod:`engine_builder.artifact_check`): a tampered, added, missing or linked file — or a
    manifest other than the one the LLMEngine recorded — ends the script with
    :data:`~engine_builder.contract.EXIT_TAMPERED` and an ``ArtifactTampered: <file>: …`` termination
    message, before Triton starts. Without a recorded digest (an artifact recorded before digests
    were), the manifest must match its own ``manifestDigest``.
    """
    cmd = ["python3", f"{CONFIG_MOUNT}/{VERIFY_SCRIPT}", ARTIFACT_MOUNT]
    if params.manifest_digest:
        cmd += ["--manifest-digest", params.manifest_digest]
    return [
        f"# Every artifact file checked against manifest.json (exit {EXIT_TAMPERED}: tampered)",
        " ".join(shlex.quote(a) for a in cmd),
    ]


def admin_key_lines() -> list[str]:
    """Bash lines stopping the pod (exit 2) when ``$TRITON_ADMIN_KEY`` is unset or empty: Triton's
    restricted APIs need a value (``render.serving.restricted_api_args``), and an empty one would
    open them to any request carrying an empty header."""
    return [
        f'if [ -z "${{{ADMIN_KEY_ENV}:-}}" ]; then',
        f'  echo "{ADMIN_KEY_ENV} is not set: the pod gets it from the Secret <deployment>-credentials" >&2',
        "  exit 2",
        "fi",
    ]


def repository_lines(params: ServingParams, models: Sequence[str] | None = None) -> list[str]:
    """Bash lines assembling ``/model-repository`` (an emptyDir) for the backend's models.

    Per rendered model (``models``, default :data:`MODELS` of the backend): its version directory
    ``1/`` from the image's own ``all_models`` copy (the Python models' ``model.py``, which must
    match the image's TensorRT-LLM), then the artifact's ``triton/`` pieces on top (code the builder
    bundled when it ran in that image wins; an artifact built elsewhere carries only ``1/.gitkeep``
    and must not hide the image's ``model.py``), then the operator's rendered config files. Only
    models the operator rendered are served — never an unfilled template of the image; a leftover
    ``${…}`` stops the pod (exit 2).
    """
    templates = IMAGE_TEMPLATES[params.backend]
    return [
        f"repo={MODEL_REPOSITORY}",
        f"for m in {' '.join(sorted(models or MODELS[params.backend]))}; do",
        '  mkdir -p "$repo/$m/1"',
        f'  for src in "{templates}/$m/1" "{ARTIFACT_MODEL_REPOSITORY}/$m/1"; do',
        '    if [ -d "$src" ]; then cp -rL "$src/." "$repo/$m/1/"; fi',
        "  done",
        "done",
        f'cp -rL "{CONFIG_MOUNT}/model-repository/." "$repo/"',
        'if grep -rl --include=config.pbtxt --include=model.yaml "\\${" "$repo"; then',
        '  echo "unfilled \\${...} template parameter in the model repository" >&2; exit 2; fi',
    ]


def _header(role: str | None = None) -> list[str]:
    """The scripts' first lines (a one-node ``launch.sh`` keeps the header it always had: a changed
    byte would roll every Deployment on an operator upgrade)."""
    if role is None:
        comment = [
            "# Rendered by trtllm-operator; see docs/serving.md. Do not edit: the operator re-renders it."
        ]
    else:
        comment = [
            f"# Rendered by trtllm-operator ({role}); see docs/serving.md.",
            "# Do not edit: the operator re-renders it.",
        ]
    return ["#!/bin/bash", *comment, "set -euo pipefail"]


def _rendered(cmd: Sequence[str]) -> str:
    """``cmd`` as one shell line, one app context per continuation line; ``$VAR``/``"$VAR"`` kept."""
    words = []
    for arg in cmd:
        if arg == ":" or (arg.startswith('"') and arg.endswith('"')):  # "$VAR", "--flag=…${VAR}"
            words.append(arg)
        else:
            words.append(shlex.quote(arg))
    return " ".join(words).replace(" : ", " \\\n  : ")


def _watchdog(rendered: str, local_ranks: int) -> list[str]:
    """Run ``rendered`` (``mpirun …``) in the background and end the replica when a local rank dies.

    SIGTERM is forwarded (Open MPI passes it to every rank). When fewer than ``local_ranks``
    ``tritonserver`` children of ``mpirun`` (this pod's ranks) are alive after all started, the
    replica is stopped and
    the script exits non-zero: ``mpirun`` already aborts the job when a rank exits non-zero, but a
    rank that exits 0 would otherwise leave a half replica that rank 0 keeps reporting as live.
    """
    return [
        f"world_size={local_ranks}",
        f"{rendered} &",
        "mpi=$!",
        "trap 'kill -TERM $mpi 2>/dev/null || true' TERM INT",
        "seen=0",
        'while kill -0 "$mpi" 2>/dev/null; do',
        '  alive=$(pgrep -c -x -P "$mpi" tritonserver || true)',
        '  if [ "$alive" -ge "$world_size" ]; then seen=1; fi',
        '  if [ "$seen" = 1 ] && [ "$alive" -lt "$world_size" ]; then',
        '    echo "a tritonserver rank exited ($alive of $world_size alive): stopping the replica" >&2',
        '    kill -TERM "$mpi" 2>/dev/null || true',
        '    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$mpi" 2>/dev/null || break; sleep 1; done',
        '    kill -KILL "$mpi" 2>/dev/null || true',
        '    wait "$mpi" || true; exit 1',
        "  fi",
        "  sleep 2 & wait $! || true",
        "done",
        'wait "$mpi"',
    ]


def rank_commands(params: ServingParams, prefix: Sequence[str] = ()) -> list[str]:
    """``mpirun``'s app contexts, each program behind ``prefix``.

    TensorRT backend: ``-n 1 tritonserver … : -n 1 tritonserver …``, one per rank (``world_size``);
    rank 0 serves every model and the ports, ranks ≥ 1 load only ``tensorrt_llm`` (leader mode,
    ``launch_triton_server.py``). PyTorch backend (several nodes): ``-n <world size>
    trtllm-llmapi-launch tritonserver …`` — TensorRT-LLM's ``trtllm-llmapi-launch`` runs the command
    on rank 0 only and ``tensorrt_llm.llmapi.mgmn_worker_node`` on every other rank
    (``tensorrt_llm/llmapi/trtllm-llmapi-launch``), so one ``tritonserver`` serves the replica.
    """
    if params.backend == "pytorch":
        server = tritonserver_args(params, leader=True, rank=0)
        return ["-n", str(params.world_size), *prefix, "trtllm-llmapi-launch", *server]
    cmd: list[str] = []
    for rank in range(params.world_size):
        if rank:
            cmd.append(":")
        cmd += ["-n", "1", *prefix, *tritonserver_args(params, leader=rank == 0, rank=rank)]
    return cmd


def mpirun_command(params: ServingParams) -> list[str]:
    """``mpirun`` over one pod's ranks (tensorrt backend, world size > 1, one node)."""
    return ["mpirun", "--allow-run-as-root", "--tag-output", *rank_commands(params)]


def server_command(params: ServingParams) -> list[str]:
    """A one-node pod's serving process: plain ``tritonserver`` for one rank, else ``mpirun``.

    PyTorch backend: the LLM-API Python model starts its own tensor/pipeline-parallel workers from
    ``model.yaml`` (docs/reference/tensorrt-llm.md §3.5: launched with the default world size 1), so
    Triton runs as one process owning every GPU of the pod.
    """
    if uses_trtllm_serve(params):
        return trtllm_serve_args(params)
    if uses_openai_frontend(params.server.api):
        return openai_frontend_args(params)
    if params.backend == "pytorch" or params.world_size == 1:
        return tritonserver_args(params, leader=True, rank=0)
    return mpirun_command(params)


def launch_script(params: ServingParams, models: Sequence[str] | None = None) -> str:
    """The main process of a one-node pod (``bash launch.sh``), as text.

    1. Assemble the model repository (:func:`repository_lines`).
    2. One rank: ``exec tritonserver`` — Triton is the main process; ``api: openai``/``both``:
       ``exec python3 …/openai_frontend/main.py`` (Triton in-process).
    3. Otherwise ``mpirun`` under the watchdog; the script exits with ``mpirun``'s status, so the
       kubelet restarts the container.

    Errors: ``ValueError`` for a multi-node replica (see :func:`leader_script`).
    """
    if params.multi_node:
        raise ValueError("a multi-node replica runs leader_script/worker_script, not launch_script")
    if uses_trtllm_serve(params):
        return trtllm_serve_script(params)
    lines = [*_header(), *verify_lines(params), *repository_lines(params, models)]
    cmd = server_command(params)
    if cmd[0] != "python3":  # tritonserver/mpirun: Triton's restricted APIs (not the OpenAI frontend)
        lines += admin_key_lines()
    if cmd[0] in ("tritonserver", "python3"):
        lines.append(f"exec {_rendered(cmd)}")
    else:
        lines += _watchdog(_rendered(cmd), params.world_size)
    return "\n".join(lines) + "\n"


def trtllm_serve_script(params: ServingParams) -> str:
    """``launch.sh`` of the pytorch backend's ``api: openai``: verify the artifact, link its
    checkpoint under the served model name (trtllm-serve 1.2 names a local model directory by its
    last path component and has no ``--served_model_name``:
    :func:`~trtllm_operator.render.serving.trtllm_serve_args`), ``exec trtllm-serve``. No Triton
    model repository: trtllm-serve builds the ``LLM`` itself and starts the node's ranks itself."""
    link = f"{TRTLLM_SERVE_MODEL_DIR}/{trtllm_serve_model_name(params)}"
    lines = [
        *_header(),
        *verify_lines(params),
        "# trtllm-serve serves a local model directory under its last path component",
        f"mkdir -p {shlex.quote(TRTLLM_SERVE_MODEL_DIR)}",
        f"ln -sfn {shlex.quote(ARTIFACT_CHECKPOINT_DIR)} {shlex.quote(link)}",
        f"exec {_rendered(trtllm_serve_args(params))}",
    ]
    return "\n".join(lines) + "\n"


def _save_environment() -> list[str]:
    return [
        "# The pod's environment, for the ranks sshd starts (rank-env.sh loads it).",
        f'mkdir -p "{POD_ENV_DIR}"',
        f'export -p > "{POD_ENV_FILE}.tmp" && mv "{POD_ENV_FILE}.tmp" "{POD_ENV_FILE}"',
    ]


def worker_hosts(params: ServingParams) -> list[str]:
    """Bash lines setting ``leader`` and the array ``workers`` from LWS's environment.

    LWS (kubernetes-sigs/lws v0.10.0) sets ``LWS_LEADER_ADDRESS`` to ``<lws>-<group>.<subdomain>.<ns>``
    (``pkg/utils/pod/pod_utils.go`` ``AddLWSVariables``) and names the workers of a group
    ``<lws>-<group>-<i>``, i = 1 … size−1 (the worker StatefulSet ``<leader pod>`` with ordinals
    from 1, ``pkg/controllers/pod_controller.go``), all under the same subdomain: the headless
    Service ``<lws>`` (``SubdomainShared``, the default). The leader is named by its short host
    name (its own ``hostname``), so Open MPI runs its ranks locally.
    """
    nodes = params.nodes_per_replica
    return [
        'lead="${LWS_LEADER_ADDRESS:?is not set: launch.sh runs in a LeaderWorkerSet leader pod}"',
        f'if [ "${{LWS_GROUP_SIZE:-}}" != "{nodes}" ]; then',
        f'  echo "LWS_GROUP_SIZE is ${{LWS_GROUP_SIZE:-unset}}; rendered for {nodes} pods per group" >&2',
        "  exit 2",
        "fi",
        'leader="${lead%%.*}"; subdomain="${lead#*.}"',
        "workers=()",
        f'for i in {" ".join(str(i) for i in range(1, nodes))}; do workers+=("$leader-$i.$subdomain"); done',
    ]


def _wait_for_workers(wait_seconds: int, port: int) -> list[str]:
    return [
        f"ssh_opts=({' '.join(ssh_options(port))})",
        f'if [ ! -s "{SSH_PRIVATE_KEY}" ]; then',
        f'  echo "{SSH_PRIVATE_KEY} is missing: the pod mounts it from the Secret '
        '<deployment>-credentials" >&2',
        "  exit 2",
        "fi",
        f'ssh_opts+=(-o IdentitiesOnly=yes -i "{SSH_PRIVATE_KEY}")',
        f"deadline=$((SECONDS + {wait_seconds}))",
        'for w in "${workers[@]}"; do',
        f'  echo "waiting for worker $w (ssh port {port}; up to {wait_seconds} s for the group)"',
        f"  next_log=$((SECONDS + {WORKER_LOG_SECONDS}))",
        '  until err=$(ssh "${ssh_opts[@]}" "$w" true 2>&1); do',
        '    if [ "$SECONDS" -ge "$deadline" ]; then',
        f'      echo "worker $w is not reachable over ssh after {wait_seconds} s '
        '(last error: ${err:-none}): not starting mpirun" >&2',
        "      exit 1",
        "    fi",
        '    if [ "$SECONDS" -ge "$next_log" ]; then',
        '      echo "still waiting for worker $w: ${err:-no answer}"',
        f"      next_log=$((SECONDS + {WORKER_LOG_SECONDS}))",
        "    fi",
        f"    sleep {WORKER_POLL_SECONDS}",
        "  done",
        '  echo "worker $w is reachable"',
        "done",
    ]


def multi_node_mpirun(params: ServingParams) -> list[str]:
    """The leader's ``mpirun`` over the group: every host, every rank behind ``rank-env.sh``."""
    return [
        '"$mpirun_bin"',
        "--allow-run-as-root",
        "--tag-output",
        "--prefix",
        '"$ompi_prefix"',
        "--host",
        '"$hosts"',
        "--mca",
        "plm_rsh_args",
        '"${ssh_opts[*]}"',
        "--mca",
        "plm_rsh_no_tree_spawn",
        "1",
        *rank_commands(params, prefix=("/bin/bash", f"{CONFIG_MOUNT}/{RANK_ENV_SCRIPT}")),
    ]


def leader_script(
    params: ServingParams,
    models: Sequence[str] | None = None,
    *,
    wait_seconds: int = WORKER_WAIT_SECONDS,
    ssh_port: int = SSH_PORT,
) -> str:
    """``launch.sh`` of a multi-node replica's leader (see the module docstring), as text.

    ``wait_seconds`` and ``ssh_port`` default to :data:`WORKER_WAIT_SECONDS` and :data:`SSH_PORT`
    (what the ConfigMap gets); tests render shorter waits and free ports.

    Exit status: 2 for a pod outside a LeaderWorkerSet group of the rendered size or an unfilled
    template; 1 when a worker stays unreachable for ``wait_seconds``; else ``mpirun``'s.
    Errors: ``ValueError`` for a replica that fits one node.
    """
    if not params.multi_node:
        raise ValueError("a one-node replica runs launch_script")
    if uses_openai_frontend(params.server.api):
        raise ValueError(f"api {params.server.api} serves one-GPU replicas only (docs/serving.md)")
    slots = params.gpus_per_node
    nodes = params.nodes_per_replica
    lines = [
        *_header("leader of a multi-node replica"),
        *verify_lines(params),
        *repository_lines(params, models),
        *_save_environment(),
        *admin_key_lines(),
        *worker_hosts(params),
        f'hosts="$leader:{slots}"',
        f'for w in "${{workers[@]}}"; do hosts="$hosts,$w:{slots}"; done',
        *_wait_for_workers(wait_seconds, ssh_port),
        'mpirun_bin="$(command -v mpirun)"',
        'ompi_prefix="$(dirname "$(dirname "$mpirun_bin")")"',
        f'echo "{nodes - 1} of {nodes - 1} workers reachable: mpirun of {params.world_size} ranks on $hosts '
        '(Open MPI at $ompi_prefix)"',
    ]
    # tritonserver processes of this pod: its node's ranks (tensorrt); rank 0 only (pytorch)
    ranks_here = min(params.world_size, slots) if params.backend == "tensorrt" else 1
    lines += _watchdog(_rendered(multi_node_mpirun(params)), ranks_here)
    return "\n".join(lines) + "\n"


def worker_script(
    params: ServingParams, models: Sequence[str] | None = None, *, ssh_port: int = SSH_PORT
) -> str:
    """``worker.sh`` of a multi-node replica's workers (see the module docstring), as text."""
    if not params.multi_node:
        raise ValueError("a one-node replica has no workers")
    lines = [
        *_header("worker of a multi-node replica"),
        *verify_lines(params),
        *repository_lines(params, models),
        *_save_environment(),
        *admin_key_lines(),
        f'if [ ! -s "{SSH_AUTHORIZED_KEYS}" ]; then',
        f'  echo "{SSH_AUTHORIZED_KEYS} is missing: the pod mounts it from the Secret '
        '<deployment>-credentials" >&2',
        "  exit 2",
        "fi",
        "# sshd (StrictModes) refuses a key file under a group/world-writable directory, as a Secret",
        "# volume's may be: it reads a root-owned copy in a directory of its own.",
        f'install -d -m 0700 "{SSHD_KEY_DIR}"',
        f'install -m 0600 "{SSH_AUTHORIZED_KEYS}" "{SSHD_AUTHORIZED_KEYS}"',
        f'sshd_opts=(-D -e -p {ssh_port} -o "AuthorizedKeysFile={SSHD_AUTHORIZED_KEYS}")',
        "mkdir -p /run/sshd",
        "ssh-keygen -A",
        'echo "worker ${LWS_WORKER_INDEX:-?} of ${LWS_LEADER_ADDRESS:-?}: model repository ready; '
        f"sshd on port {ssh_port} for the leader's mpirun\"",
        'exec /usr/sbin/sshd "${sshd_opts[@]}"',
    ]
    return "\n".join(lines) + "\n"


#: ``rank-env.sh``: run one rank (``$@``) with the environment its pod saved at start.
RANK_ENV = f"""#!/bin/bash
# Rendered by trtllm-operator (every rank of a multi-node replica); see docs/serving.md.
# sshd starts Open MPI's orted with sshd's own environment, not the image's: load the pod's.
if [ -f "{POD_ENV_FILE}" ]; then
  # shellcheck disable=SC1091
  . "{POD_ENV_FILE}"
else
  echo "{POD_ENV_FILE} is missing: the pod's launch script has not run" >&2; exit 2
fi
exec "$@"
"""


def launch_files(params: ServingParams, models: Sequence[str]) -> dict[str, str]:
    """ConfigMap entries of the pod's processes: ``launch.sh`` and ``verify-artifact.py``, and for
    several nodes ``worker.sh`` and ``rank-env.sh``."""
    if not params.multi_node:
        return {LAUNCH_SCRIPT: launch_script(params, models), VERIFY_SCRIPT: verifier_source()}
    return {
        VERIFY_SCRIPT: verifier_source(),
        LAUNCH_SCRIPT: leader_script(params, models),
        WORKER_SCRIPT: worker_script(params, models),
        RANK_ENV_SCRIPT: RANK_ENV,
    }
