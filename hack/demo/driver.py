"""``make demo``: trtllm-operator end to end on a local control plane with kwok-simulated GPU nodes.

    hack/demo.sh            run the demo; leaves the control plane, operator and Triton servers running
    hack/demo.sh down       stop everything the demo started (by PID), keep .local/demo for reading

Steps (docs/demo.md): local control plane → Helm chart (CRDs, RBAC) and the operator running as
the chart's ServiceAccount → a real engine-builder run on this CPU for a tiny Llama (FP8 with
ModelOpt, TP 2 checkpoint, Triton repository, manifest; no trtllm-build, so a partial artifact
with no compiled engine) → engine cache import (``--allow-partial``) →
the example LLMEngines and the LLMDeployment ``tiny-chat``, every Ready pod of which gets a real
``tritonserver`` (2.51 on this CPU, with a CPU stand-in for the TensorRT-LLM engine: docs/triton-cpu.md)
bound to the pod's IP → a generate request and its text, then real load (tritonclient) and the
autoscaler's decisions on the servers' real metrics → summary.

Every line shows the elapsed time; each step writes its full output to
``<work>/logs/<NN>-<step>.log``. On failure the failing step's log tail (and the operator's) is
printed and the exit code is 1. ``<work>/summary.json`` records what happened (the e2e test reads it).

Environment: ``TRTLLM_DEMO_DIR`` (work directory, default ``.local/demo``; the demo's control plane
lives in ``<work>/cluster``, apart from a ``hack/local-cluster`` dev cluster in ``.local/cluster``),
``TRTLLM_DEMO_KEEP=0`` (stop everything at the end instead of leaving it running to explore).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import yaml
from kubernetes import client, config

from trtllm_operator.api.signals import SIGNALS
from trtllm_operator.api.wire import LABEL_SECRET_USABLE

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack"))
import tritoncpu  # noqa: E402
from localcluster import free_port  # noqa: E402  (the operator binds them itself: a residual race)
from tritoncpu.load import LoadGenerator  # noqa: E402

WORK = Path(os.environ.get("TRTLLM_DEMO_DIR") or ROOT / ".local" / "demo").resolve()
CLUSTER_DIR = WORK / "cluster"
LOGS = WORK / "logs"
PIDS = WORK / "pids"
VOLUMES = WORK / "volumes"
EXAMPLES = ROOT / "examples" / "demo"
VENV_BIN = Path(sys.executable).parent

NS = "trtllm-demo"  # where the examples go; the operator watches only this namespace
OP_NS = "trtllm-operator"  # the chart's release namespace (the operator's own)
RELEASE = "trtllm-operator"
GROUP, VERSION = "llm.trtllm-operator.dev", "v1alpha1"
TINY_ENGINE, TINY_DEPLOYMENT = "tiny-llama-fp8-tp2", "tiny-chat"
BIG_ENGINE = "demo-llama-3-1-8b-fp8"
HF_CONFIG_DIR = ROOT / "tests" / "fixtures" / "model-configs"
DEPLOYMENT_LABEL = "llm.trtllm-operator.dev/deployment"
#: Closed-loop load on tiny-chat: concurrent generate requests of MAX_TOKENS new tokens each. Each
#: request reserves ceil((prompt + 96) / 32) = 4 of the 32 KV blocks of a replica
#: (tiny-chat.yaml: maxTokensInPagedKvCache 1024; GUARANTEED_NO_EVICT reserves the whole length),
#: so 24 in flight fill three replicas' pools.
LOAD_CONCURRENCY = 24
LOAD_MAX_TOKENS = 96
SAMPLE_PROMPT = "The quick brown fox"
POD_STATE = WORK / "triton-pods.json"

T = TypeVar("T")
_START = time.monotonic()


# ------------------------------------------------------------------------------------ output
def clock() -> str:
    s = int(time.monotonic() - _START)
    return f"{s // 60:2d}:{s % 60:02d}"


def say(text: str = "", *, indent: int = 6) -> None:
    for line in (text or "").splitlines() or [""]:
        print(f"[{clock()}] {' ' * indent}{line}", flush=True)


def cmd_line(args: list[str]) -> str:
    """A command as the user would type it: repo-relative paths, bundled binaries by name."""
    shown = []
    for arg in args:
        text = str(arg)
        for prefix, repl in ((str(ROOT) + "/", ""), (str(VENV_BIN) + "/", ".venv/bin/")):
            text = text.replace(prefix, repl)
        if "/testbin/" in text:
            text = Path(text).name
        shown.append(text)
    return shlex.join(shown)


class StepError(Exception):
    """A step could not finish; the message says what was expected."""


class Step:
    """One numbered step: its log file and its timing."""

    def __init__(self, demo: Demo, number: int, total: int, slug: str, title: str) -> None:
        self.demo, self.number, self.total, self.slug, self.title = demo, number, total, slug, title
        self.log_path = LOGS / f"{number:02d}-{slug}.log"
        self.log: IO[str] = self.log_path.open("a", encoding="utf-8")
        self.started = time.monotonic()

    def write(self, text: str) -> None:
        self.log.write(text if text.endswith("\n") else text + "\n")
        self.log.flush()


# ------------------------------------------------------------------------------------ helpers
def http_json(url: str, method: str = "GET", body: Any = None, timeout: float = 5.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


#: Background processes the demo started (name → pid); a wait fails at once when one has exited.
BACKGROUND: dict[str, int] = {}


def wait_for(fn: Callable[[], T | None], *, timeout: float, desc: str, interval: float = 0.5) -> T:
    """Poll ``fn`` until it returns something truthy; StepError naming ``desc`` after ``timeout`` s,
    or as soon as a background process of the demo (operator, Triton pod runner) has exited. A
    StepError that ``fn`` raises (e.g. a serving pod's server crash-looping) is the failure and goes
    through at once; any other exception is taken as an API hiccup and retried until the deadline."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        for name, pid in BACKGROUND.items():
            if not _pid_alive(pid):
                raise StepError(f"the {name} (pid {pid}) has exited while waiting for {desc}; see {name}.log")
        try:
            value = fn()
            if value:
                return value
        except StepError:
            raise
        except Exception as exc:  # an API hiccup while polling: keep trying until the deadline
            last_exc = exc
        if time.monotonic() > deadline:
            extra = f" (last error: {last_exc})" if last_exc else ""
            raise StepError(f"timed out after {timeout:.0f} s waiting for {desc}{extra}")
        time.sleep(interval)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------------------------------ the demo
class Demo:
    def __init__(self) -> None:
        self.step: Step | None = None
        self.steps: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {"steps": self.steps, "notLanded": [], "simulated": []}
        self.bin_dir: Path | None = None
        self.api: Any = None
        self.pod_runner: int | None = None
        #: restarts of serving pods' servers already told (pod → count), see :meth:`pod_state`.
        self.told_restarts: dict[str, int] = {}

    # -- plumbing -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def stage(self, number: int, total: int, slug: str, title: str) -> Iterator[Step]:
        step = Step(self, number, total, slug, title)
        self.step = step
        print(f"[{clock()}] ==> {number}/{total} {title}", flush=True)
        record: dict[str, Any] = {"step": slug, "title": title}
        self.steps.append(record)
        try:
            yield step
        except BaseException:
            record["status"] = "failed"
            record["seconds"] = round(time.monotonic() - step.started, 1)
            raise
        record["status"] = "ok"
        record["seconds"] = round(time.monotonic() - step.started, 1)
        say(f"done in {record['seconds']:.1f} s")
        step.log.close()

    def sh(
        self,
        args: list[str],
        *,
        env: dict[str, str] | None = None,
        input: str | None = None,
        echo: Callable[[str], bool] | None = None,
        check: bool = True,
        show: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command; its output goes to the step log (lines ``echo`` accepts also to the screen)."""
        assert self.step is not None
        if show:
            say(f"$ {cmd_line(args)}")
        self.step.write(f"$ {shlex.join(str(a) for a in args)}")
        proc = subprocess.Popen(
            [str(a) for a in args],
            cwd=ROOT,
            env=env or self.env(),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if input is not None and proc.stdin is not None:
            proc.stdin.write(input)
            proc.stdin.close()
        lines: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            self.step.write(line)
            lines.append(line)
            if echo is not None and echo(line):
                say("  " + line.rstrip())
        rc = proc.wait()
        out = "".join(lines)
        if check and rc != 0:
            raise StepError(f"`{cmd_line(args)}` exited with code {rc}")
        return subprocess.CompletedProcess(args, rc, out, "")

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRTLLM_OPERATOR_", "KUBECONFIG"))}
        env["KUBECONFIG"] = str(CLUSTER_DIR / "kubeconfig")
        if self.bin_dir is not None:
            env["PATH"] = f"{self.bin_dir}:{VENV_BIN}:{env.get('PATH', '')}"
        env["HELM_CACHE_HOME"] = str(WORK / "helm" / "cache")
        env["HELM_CONFIG_HOME"] = str(WORK / "helm" / "config")
        env["HELM_DATA_HOME"] = str(WORK / "helm" / "data")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        assert self.bin_dir is not None
        return self.sh([str(self.bin_dir / "kubectl"), *args], **kw)

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> int:
        """Start a background process in its own session; its PID goes to ``<work>/pids``."""
        log = (LOGS / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        PIDS.mkdir(parents=True, exist_ok=True)
        (PIDS / f"{name}.json").write_text(json.dumps({"pid": proc.pid, "argv": args}))
        self.summary.setdefault("pids", {})[name] = proc.pid
        BACKGROUND[name] = proc.pid
        if self.step is not None:
            self.step.write(f"started {name} (pid {proc.pid}): {shlex.join(args)}")
        return proc.pid

    def custom(self, plural: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
            GROUP, VERSION, NS, plural, name
        )
        return obj

    # -- step 1 ---------------------------------------------------------------------------------
    def control_plane(self, n: int, total: int) -> None:
        with self.stage(n, total, "control-plane", "Local control plane with kwok-simulated GPU nodes") as st:
            say(f"Python {sys.version.split()[0]} ({sys.executable}); work directory {WORK}")
            out = self.sh(
                [str(ROOT / "hack" / "build-testbin.sh")],
                env=self.env(),
                echo=lambda line: line.startswith("[build-testbin]"),
            )
            self.bin_dir = Path(out.stdout.strip().splitlines()[-1])
            if not (self.bin_dir / "kube-apiserver").exists():
                raise StepError(f"hack/build-testbin.sh did not print a bin directory: {out.stdout[-300:]}")
            say(f"binaries (cached build): {self.bin_dir}")
            self.sh(
                [str(ROOT / "hack" / "local-cluster"), "--work-dir", str(CLUSTER_DIR), "up"],
                echo=lambda line: (
                    bool(re.match(r"^(NAME|h100|a100|cpu)-?", line)) or "version" in line.lower()
                ),
                show=True,
            )
            say("kwok plays the kubelets: these nodes and every pod on them are simulated (no container")
            say("runs, no GPU is used); etcd, kube-apiserver, controller-manager and scheduler are real.")
            self.api = config.new_client_from_config(config_file=str(CLUSTER_DIR / "kubeconfig"))
            self.summary["kubeconfig"] = str(CLUSTER_DIR / "kubeconfig")
            st.write("control plane up")

    # -- step 2 ---------------------------------------------------------------------------------
    def operator(self, n: int, total: int) -> None:
        with self.stage(
            n, total, "operator", "Helm chart (CRDs, RBAC, ServiceAccount) and the operator"
        ) as st:
            assert self.bin_dir is not None
            self.kubectl("create", "namespace", NS, show=True)
            extra_env = [{"name": "TRTLLM_OPERATOR_HF_CONFIG_DIR", "value": str(HF_CONFIG_DIR)}]
            helm = [
                str(self.bin_dir / "helm"),
                "install",
                RELEASE,
                str(ROOT / "charts" / "trtllm-operator"),
                "--namespace",
                OP_NS,
                "--create-namespace",
                "-f",
                str(EXAMPLES / "values.yaml"),
                "--set-json",
                f"settings.extraEnv={json.dumps(extra_env, separators=(',', ':'))}",
            ]
            self.sh(helm, echo=lambda line: line.startswith(("NAME:", "STATUS:", "NAMESPACE:")), show=True)
            say("replicaCount=0: the chart's operator Deployment would be a kwok pod that runs nothing, so")
            say("the operator runs on this machine instead, authenticated as the chart's ServiceAccount.")
            crds = self.kubectl("get", "crd", "-o", "name").stdout.split()
            ours = sorted(c.split("/", 1)[1] for c in crds if c.endswith(GROUP))
            say(f"CRDs: {', '.join(ours)}")
            say("  (hack/local-cluster applied crds/ at start; the chart's crds/ holds the same files)")
            sa = self.kubectl(
                "get",
                "serviceaccount",
                "-n",
                OP_NS,
                "-l",
                f"app.kubernetes.io/instance={RELEASE}",
                "-o",
                "jsonpath={.items[0].metadata.name}",
            ).stdout.strip()
            if not sa:
                raise StepError(f"the chart created no ServiceAccount in namespace {OP_NS}")
            token = self.kubectl(
                "create", "token", sa, "-n", OP_NS, "--duration", "24h", show=True
            ).stdout.strip()
            kubeconfig = self._sa_kubeconfig(token, sa)
            say(f"operator kubeconfig: {cmd_line([str(kubeconfig)])}")
            say(f"  (user system:serviceaccount:{OP_NS}:{sa}, a token and nothing else)")
            checks = [
                (["create", "jobs.batch", "-n", NS], "yes"),
                (["patch", "llmdeployments.llm.trtllm-operator.dev/scale", "-n", NS], "yes"),
                # Secrets: metadata of referenced ones only (get); never list or watch
                (["list", "secrets", "-n", NS], "no"),
                (["create", "jobs.batch", "-n", "default"], "no"),
            ]
            for args, want in checks:
                got = self.kubectl(
                    "--kubeconfig", str(kubeconfig), "auth", "can-i", *args, check=False
                ).stdout
                got = got.strip().splitlines()[0] if got.strip() else "?"
                say(f"RBAC as the operator: can-i {' '.join(args):<58} {got}")
                if got != want:
                    raise StepError(f"RBAC: expected `can-i {' '.join(args)}` to be {want}, got {got}")
            self.summary["rbac"] = "checked"
            args, env, liveness = self._chart_command(kubeconfig)
            shown_env = " ".join(f"{k}={cmd_line([v])}" for k, v in env.items() if k.startswith("TRTLLM_"))
            say("the operator, with the args and env of the chart's Deployment (ports moved to free ones):")
            say(f"$ {shown_env} \\")
            say(f"    KUBECONFIG={cmd_line([str(kubeconfig)])} {cmd_line(args)} &")
            say("  (no downloads here: it plans from the config.json files in TRTLLM_OPERATOR_HF_CONFIG_DIR)")
            pid = self.spawn("operator", args, self.env(KUBECONFIG=str(kubeconfig), **env))

            def healthy() -> bool:
                if not _pid_alive(pid):
                    raise StepError("the operator exited; see its log")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{liveness}/healthz", timeout=2) as r:
                        return bool(r.status == 200)
                except (urllib.error.URLError, OSError):
                    return False

            wait_for(healthy, timeout=90, desc="the operator's liveness endpoint")
            say(f"operator running (pid {pid}), healthy; log: {cmd_line([str(LOGS / 'operator.log')])}")
            st.write(f"operator pid {pid}")

    def _chart_command(self, kubeconfig: Path) -> tuple[list[str], dict[str, str], int]:
        """argv, TRTLLM_OPERATOR_* environment and liveness port of the chart's operator container,
        read back from the installed Deployment; the two listening ports moved to free local ports."""
        apps = client.AppsV1Api(self.api)
        deployments = apps.list_namespaced_deployment(
            OP_NS, label_selector=f"app.kubernetes.io/instance={RELEASE}"
        )
        if not deployments.items:
            raise StepError(f"the chart installed no Deployment in namespace {OP_NS}")
        container = deployments.items[0].spec.template.spec.containers[0]
        liveness = free_port()
        args = [str(VENV_BIN / "trtllm-operator")]
        chart_args = list(container.args or [])
        while chart_args:
            arg = chart_args.pop(0)
            if arg == "--liveness-port" and chart_args:
                chart_args.pop(0)  # "--liveness-port PORT": drop the chart's port
            if not arg.startswith("--liveness-port"):
                args.append(arg)
        args.append(f"--liveness-port={liveness}")
        env: dict[str, str] = {}
        for var in container.env or []:
            if var.value is not None:
                env[var.name] = var.value
            elif var.value_from is not None and var.value_from.field_ref is not None:
                if var.value_from.field_ref.field_path != "metadata.namespace":
                    raise StepError(
                        f"chart env {var.name}: cannot resolve {var.value_from.field_ref.field_path}"
                    )
                env[var.name] = OP_NS
        if "TRTLLM_OPERATOR_METRICS_PORT" in env:
            env["TRTLLM_OPERATOR_METRICS_PORT"] = str(free_port())
        self.summary["operatorCommand"] = {"args": args, "env": env}
        return args, env, liveness

    def _sa_kubeconfig(self, token: str, sa: str) -> Path:
        admin = yaml.safe_load((CLUSTER_DIR / "kubeconfig").read_text())
        cluster = admin["clusters"][0]["cluster"]
        user = f"system:serviceaccount:{OP_NS}:{sa}"
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "demo", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "operator", "context": {"cluster": "demo", "user": user, "namespace": NS}}],
            "current-context": "operator",
        }
        path = WORK / "operator.kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        path.chmod(0o600)
        return path

    # -- step 3 ---------------------------------------------------------------------------------
    def build_engine(self, n: int, total: int) -> None:
        title = "Engine build on this CPU: tiny Llama → FP8 (ModelOpt) → TP 2 checkpoint → Triton repo"
        with self.stage(n, total, "engine-build", title) as st:
            model_dir = VOLUMES / "models" / "tiny-llama"
            (VOLUMES / "engine-store").mkdir(parents=True, exist_ok=True)
            out = self.sh(
                [str(VENV_BIN / "engine-builder"), "make-tiny-model", str(model_dir)],
                echo=lambda line: line.startswith("tiny Llama"),
                show=True,
            )
            st.write(out.stdout[-200:])
            say("a random-initialised Llama as safetensors, tokenizer trained locally: nothing downloaded;")
            say("it sits where the PVC `models` is mounted (pvc://models/tiny-llama)")
            builder = WORK / "builder"
            builder.mkdir(parents=True, exist_ok=True)
            engine_yaml = EXAMPLES / "tiny-llama-fp8-tp2.yaml"
            store = VOLUMES / "engine-store"
            out = self.sh(
                [
                    str(VENV_BIN / "trtllm-operator"),
                    "cache",
                    "spec",
                    "-f",
                    str(engine_yaml),
                    "--artifact-root",
                    str(store),
                ],
                show=True,
            )
            say("  the build spec the operator would give a builder Job for this LLMEngine")
            # self.sh merges stderr into stdout: cache spec's note (the pvc:// model's config checks
            # are skipped there; the builder's plan stage runs them) is no part of the spec's YAML
            printed = "".join(
                line
                for line in out.stdout.splitlines(keepends=True)
                if not line.startswith("trtllm-operator ")
            )
            match = re.search(r"engine key: ([0-9a-f]{64})", printed)
            if not match:
                raise StepError("`trtllm-operator cache spec` printed no engine key")
            key = match.group(1)
            spec = yaml.safe_load(printed)
            # The builder writes its report to output.termination_log (the container's termination
            # message path). Here that is a file of the demo, not /dev/termination-log of this machine;
            # output.* is not part of the engine key.
            spec["output"]["termination_log"] = str(builder / "termination-log")
            spec_path = builder / "build.yaml"
            spec_path.write_text(f"# engine key: {key}\n" + yaml.safe_dump(spec, sort_keys=False))
            say(f"  → {cmd_line([str(spec_path)])}: engine key {key[:12]}…")
            say(f"    artifact root {cmd_line([str(store)])} (the engine-store PVC's directory)")
            stage_start = re.compile(r"^\[(fetch|inspect|plan|quantize|convert|compile|package)\] [A-Za-z]")
            calibrating = re.compile(r"^\[quantize\]\s+[0-9.]+% \(\d+/\d+ samples\)")
            stage_line = re.compile(r"^\[(\w+)\] .*(done in|skipped|Partial|Succeeded|Failed)")
            self.sh(
                [
                    str(VENV_BIN / "engine-builder"),
                    "run",
                    "--spec",
                    str(spec_path),
                    "--workdir",
                    str(builder / "work"),
                    "--skip-compile",
                    "--pvc-root",
                    str(VOLUMES),
                    "--serving-root",
                    "/artifacts",
                ],
                echo=lambda line: (
                    bool(stage_line.match(line) or calibrating.match(line) or stage_start.match(line))
                    or line.startswith("[builder]")
                ),
                show=True,
            )
            report = json.loads((builder / "work" / "report.json").read_text())
            if report.get("engineKey") != key:
                raise StepError(
                    f"the builder computed engine key {report.get('engineKey')}, the operator {key}"
                )
            artifact = Path(report["artifactURI"])
            manifest = json.loads((artifact / "manifest.json").read_text())
            files = [p for p in artifact.rglob("*") if p.is_file()]
            say(
                f"artifact: {cmd_line([str(artifact)])}/ — {len(files)} files, {report['sizeBytes']:,} bytes,"
            )
            digest = report["manifestDigest"][:19]
            say(f"  manifest digest {digest}…; status {report['status']} ({report['reason']})")
            for sub in ("checkpoint", "triton", "tokenizer"):
                names = sorted(p.name + ("/" if p.is_dir() else "") for p in (artifact / sub).iterdir())
                say(f"  {sub + '/':12s} {'  '.join(names)}")
            q = manifest.get("quantization") or {}
            say(f"quantized with ModelOpt {q.get('modelopt', '?')} on {q.get('device', '?')}:")
            say(
                f"  {q.get('format')} weights, {q.get('kv_cache_dtype')} KV cache, "
                f"{q.get('samples')} calibration samples"
            )
            say("NOT run: the trtllm-build compile (it needs an NVIDIA GPU and TensorRT-LLM).")
            say("The artifact holds the quantized TP-2 checkpoint; manifest.json records the")
            say("trtllm-build command that a build on a GPU node runs:")
            for line in _wrap_command((manifest.get("compile") or {}).get("command") or []):
                say("  " + line)
            self.summary["tinyEngine"] = {
                "engineKey": key,
                "artifact": str(artifact),
                "report": report,
                "compile": (manifest.get("compile") or {}).get("status"),
                "plan": manifest.get("plan"),
            }
            self.summary["simulated"].append("trtllm-build compile not run (no GPU, no TensorRT-LLM)")

    # -- step 4 ---------------------------------------------------------------------------------
    def cache_import(self, n: int, total: int) -> None:
        with self.stage(n, total, "cache-import", "Engine cache: register the artifact for its engine key"):
            tiny = self.summary["tinyEngine"]
            manifest = Path(tiny["artifact"]) / "manifest.json"
            self.sh(
                [
                    str(VENV_BIN / "trtllm-operator"),
                    "cache",
                    "import",
                    "--manifest",
                    str(manifest),
                    "--namespace",
                    NS,
                    "--storage",
                    "pvc://engine-store",
                    "--allow-partial",
                ],
                echo=lambda line: bool(line.strip()),
                show=True,
            )
            say("  (it checks that manifest.json's engineKey is the sha256 of its keyInputs, and the digest)")
            say("--allow-partial: this artifact has NO compiled engine (compile skipped), so Triton's")
            say("TensorRT-LLM backend on a GPU could not load it; without the flag the import is refused.")
            say("The demo opts in: its serving pods run a real Triton whose engine is a CPU stand-in that")
            say("serves the artifact's checkpoint (docs/triton-cpu.md).")
            say(f"an LLMEngine with key {tiny['engineKey'][:12]}… and storage pvc://engine-store is now")
            say("served from this artifact: the operator creates no builder Job for it")

    # -- step 5 ---------------------------------------------------------------------------------
    def apply_examples(self, n: int, total: int) -> None:
        with self.stage(n, total, "examples", "Apply the examples: two LLMEngines and an LLMDeployment"):
            core = client.CoreV1Api(self.api)
            storage = string.Template((EXAMPLES / "storage.yaml").read_text()).substitute(
                VOLUMES=str(VOLUMES)
            )
            say(
                "$ kubectl apply -f examples/demo/storage.yaml   # PVCs models + engine-store (pre-bound PVs)"
            )
            self.kubectl("apply", "-f", "-", input=storage)
            for pv, pvc in (("trtllm-demo-models", "models"), ("trtllm-demo-engine-store", "engine-store")):
                core.patch_persistent_volume_status(pv, {"status": {"phase": "Bound"}})
                cap = core.read_persistent_volume(pv).spec.capacity
                core.patch_namespaced_persistent_volume_claim_status(
                    pvc, NS, {"status": {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": cap}}
                )
            say("  marked Bound by the demo (no PV binder runs in the local control plane)")
            self.kubectl(
                "create",
                "secret",
                "generic",
                "hf-token",
                "-n",
                NS,
                "--from-literal=token=not-a-real-token-kwok-runs-no-container",
                show=True,
            )
            # Whoever controls the Secret lets LLM resources reference it (docs/security.md).
            self.kubectl("label", "secret", "hf-token", "-n", NS, f"{LABEL_SECRET_USABLE}=true", show=True)
            for name in ("tiny-llama-fp8-tp2.yaml", "llama-3.1-8b-fp8.yaml"):
                self.kubectl(
                    "apply", "-f", str(EXAMPLES / name), show=True, echo=lambda line: "created" in line
                )
            self._follow_tiny()
            self._follow_big()
            self._start_pod_runner()
            self.kubectl(
                "apply",
                "-f",
                str(EXAMPLES / "tiny-chat.yaml"),
                show=True,
                echo=lambda line: "created" in line,
            )
            self._wait_deployments()

    def _engine_status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.custom("llmengines", name).get("status") or {}
        return status

    def _follow_tiny(self) -> None:
        status = wait_for(
            lambda: (s := self._engine_status(TINY_ENGINE)).get("phase") == "Ready" and s,
            timeout=60,
            desc=f"LLMEngine {TINY_ENGINE} Ready",
        )
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Progressing"), {})
        jobs = client.BatchV1Api(self.api).list_namespaced_job(NS).items
        key = status.get("engineKey") or ""
        tiny_jobs = [j.metadata.name for j in jobs if key and key[:16] in j.metadata.name]
        if key != self.summary["tinyEngine"]["engineKey"]:
            raise StepError(f"{TINY_ENGINE}: status.engineKey {key[:12]} is not the key built on the CPU")
        if tiny_jobs:
            raise StepError(f"{TINY_ENGINE} should be served from the cache, but Jobs exist: {tiny_jobs}")
        complete = next((c for c in status.get("conditions") or [] if c["type"] == "ArtifactComplete"), {})
        say(f"llmengine/{TINY_ENGINE}: Ready, {ready.get('reason')} — {ready.get('message')}")
        say(f"  no builder Job: the key was found in the engine cache; artifact {status['artifact']['uri']}")
        say(f"  ArtifactComplete={complete.get('status')} ({complete.get('reason')}): the artifact has no")
        say("  compiled engine; `kubectl get llmengines` shows Partial=true")
        self.summary["tinyEngine"].update(
            phase="Ready",
            reason=ready.get("reason"),
            jobs=tiny_jobs,
            artifactComplete=complete.get("status"),
            artifactCompleteReason=complete.get("reason"),
            partial=(status.get("artifact") or {}).get("partial"),
        )

    def _follow_big(self) -> None:
        batch, core = client.BatchV1Api(self.api), client.CoreV1Api(self.api)
        status = wait_for(
            lambda: (
                (s := self._engine_status(BIG_ENGINE)).get("phase") in ("Building", "Ready", "Failed") and s
            ),
            timeout=60,
            desc=f"LLMEngine {BIG_ENGINE} to start building",
        )
        plan = status.get("plan") or {}
        job_name = (status.get("build") or {}).get("jobName")
        if status.get("phase") == "Failed" or not job_name:
            phase = status.get("phase")
            raise StepError(f"{BIG_ENGINE}: expected a builder Job, got phase {phase}: {status.get('build')}")
        short = status.get("engineKeyShort")
        say(f"llmengine/{BIG_ENGINE}: {status['phase']}, engine key {short}, builder job/{job_name}")
        selector = f"batch.kubernetes.io/job-name={job_name}"

        def scheduled() -> Any:
            pods = core.list_namespaced_pod(NS, label_selector=selector).items
            return next((p for p in pods if p.spec.node_name), None)

        pod = wait_for(scheduled, timeout=60, desc=f"the builder pod of job/{job_name} to be scheduled")
        limits = pod.spec.containers[0].resources.limits or {}
        node = core.read_node(pod.spec.node_name)
        product = (node.metadata.labels or {}).get("nvidia.com/gpu.product")
        say(
            f"  pod/{pod.metadata.name} scheduled on {pod.spec.node_name} ({product}), "
            f"nvidia.com/gpu: {limits.get('nvidia.com/gpu')}"
        )
        say("  kwok runs it for 6 s, then completes it (exit 0) as spec.gpu.podAnnotations say — with")
        say("  no builder report and no manifest: no container runs, no 8B engine is built")
        status = wait_for(
            lambda: (s := self._engine_status(BIG_ENGINE)).get("phase") in ("Ready", "Failed") and s,
            timeout=90,
            desc=f"LLMEngine {BIG_ENGINE} to finish",
        )
        reason = (status.get("build") or {}).get("reason")
        if status["phase"] != "Failed" or reason != "ArtifactMissing":
            raise StepError(
                f"{BIG_ENGINE}: a build that wrote nothing must end Failed/ArtifactMissing, got "
                f"{status['phase']}: {status.get('build')}"
            )
        job = batch.read_namespaced_job(job_name, NS)
        say(f"llmengine/{BIG_ENGINE}: Failed, {reason} — {(status.get('build') or {}).get('message')}")
        say("  (the Job succeeded, but nothing verifiable was built: no cache entry, never Ready)")
        plan = status.get("plan") or plan
        self.summary["bigEngine"] = {
            "engineKey": status.get("engineKey"),
            "phase": status["phase"],
            "reason": reason,
            "job": job_name,
            "jobSucceeded": job.status.succeeded,
            "node": pod.spec.node_name,
            "gpuProduct": product,
            "plan": plan,
        }
        self.summary["simulated"].append(
            "8B builder pod completed by kwok from spec.gpu.podAnnotations, without a report "
            "(Failed/ArtifactMissing)"
        )

    def _start_pod_runner(self) -> None:
        """Real Triton servers for the serving pods (hack/tritoncpu/pods.py), in the background."""
        rt = tritoncpu.runtime()
        args = [
            sys.executable,
            "-m",
            "tritoncpu.pods",
            "--namespace",
            NS,
            "--selector",
            f"{DEPLOYMENT_LABEL}={TINY_DEPLOYMENT}",
            "--kubeconfig",
            str(CLUSTER_DIR / "kubeconfig"),
            "--work-dir",
            str(WORK / "pods"),
            "--state",
            str(POD_STATE),
        ]
        say(f"$ PYTHONPATH=hack {cmd_line(args)} &")
        say("  kwok runs no container: this plays the kubelet for the triton container of every Running")
        say(f"  pod of llmdeployment/{TINY_DEPLOYMENT}. It runs the pod's own launch.sh from its ConfigMap")
        say(
            "  with the artifact PVC's directory, so a real tritonserver (2.51, from nvidia-pytriton; runtime"
        )
        say(f"  {cmd_line([str(rt)])}) serves on the pod's IP:8000/8001/8002, and keeps the pod")
        say("  unready until /v2/health/ready answers, as the readiness probe would. A server that exits")
        say("  is restarted as a kubelet would (at once, then after 10 s, 20 s, ...; the pod unready); one")
        say("  that exits 3 times in a row fails the demo, naming the pod, its exit and its log.")
        self.pod_runner = self.spawn("triton-pods", args, self.env(PYTHONPATH=str(ROOT / "hack")))

    def pod_state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(POD_STATE.read_text())
        except (OSError, ValueError):
            return {"pods": {}, "failed": {}}
        for pod, count in sorted((state.get("restarts") or {}).items()):
            if count > self.told_restarts.get(pod, 0):
                self.told_restarts[pod] = count
                say(
                    f"pod/{pod}: its tritonserver exited; the pod runner restarts it as a kubelet would (at "
                    f"once, then with back-off; restartCount {count}, pod unready meanwhile); log "
                    f"{cmd_line([str(WORK / 'pods' / f'{pod}.exit-{count}.log')])}, logs/triton-pods.log"
                )
        if state.get("failed"):
            raise StepError(
                "a serving pod's tritonserver failed: "
                + "; ".join(f"pod/{pod}: {why}" for pod, why in sorted(state["failed"].items()))
                + "; see logs/triton-pods.log"
            )
        return state

    def ready_addresses(self) -> list[str]:
        """IPs of the serving pods whose real tritonserver is ready (the load's endpoints)."""
        return sorted(p["address"] for p in self.pod_state()["pods"].values() if p["ready"])

    def serving_addresses(self) -> list[str]:
        """:meth:`ready_addresses` less the pods the API server no longer lists or lists as terminating
        (``metadata.deletionTimestamp`` set): the pod runner's state file notices a deletion a few
        seconds late, so right after a scale-down it still lists the removed pod (trial 50 X3)."""
        core = client.CoreV1Api(self.api)
        pods = core.list_namespaced_pod(NS, label_selector=f"{DEPLOYMENT_LABEL}={TINY_DEPLOYMENT}").items
        alive = {p.status.pod_ip for p in pods if p.metadata.deletion_timestamp is None and p.status.pod_ip}
        return [address for address in self.ready_addresses() if address in alive]

    def _wait_deployments(self) -> None:
        core = client.CoreV1Api(self.api)

        def ready() -> dict[str, Any] | None:
            s: dict[str, Any] = self.custom("llmdeployments", TINY_DEPLOYMENT).get("status") or {}
            ok = s.get("phase") == "Ready" and (s.get("readyReplicas") or 0) >= 1 and self.ready_addresses()
            return s if ok else None

        s = wait_for(
            ready, timeout=300, desc=f"LLMDeployment {TINY_DEPLOYMENT} Ready with a real tritonserver"
        )
        pods = core.list_namespaced_pod(NS, label_selector=f"{DEPLOYMENT_LABEL}={TINY_DEPLOYMENT}").items
        servers = self.pod_state()["pods"]
        for p in pods:
            srv = servers.get(p.metadata.name) or {}
            say(
                f"pod/{p.metadata.name} on {p.spec.node_name} ({p.status.pod_ip}): tritonserver pid "
                f"{srv.get('pid', '-')}, {'ready' if srv.get('ready') else 'starting'}"
            )
        say(
            f"llmdeployment/{TINY_DEPLOYMENT}: Ready {s.get('readyReplicas')}/{s.get('replicas')}, "
            f"endpoint {s.get('endpoint')}"
        )
        say(
            f"llmdeployment/{TINY_DEPLOYMENT} serves a partial artifact (no compiled engine): allowed only by"
        )
        say('  its annotation llm.trtllm-operator.dev/allow-partial-artifact: "true"; the CPU stand-in')
        say("  serves the artifact's TP-2 checkpoint (rank0 + rank1, FP8 dequantized), the engine does not")
        self.summary["tritonPods"] = servers
        self.summary["simulated"].append(
            "the TensorRT-LLM engine: a CPU stand-in runs the builder's checkpoint with PyTorch "
            "(docs/triton-cpu.md)"
        )
        self.summary["simulated"].append("kwok plays the kubelets: no container runtime, no GPU")

    # -- step 6 ---------------------------------------------------------------------------------
    def autoscaling(self, n: int, total: int) -> None:
        with self.stage(n, total, "autoscaling", "Requests and autoscaling on real Triton servers"):
            self._request()
            self._autoscaling()

    def _request(self) -> None:
        # A server the pod runner is restarting (back-off) is not ready: wait for one that is.
        address = wait_for(
            lambda: next(iter(self.ready_addresses()), None), timeout=300, desc="a ready tritonserver"
        )
        body = {"text_input": SAMPLE_PROMPT, "max_tokens": 24}
        say(f"$ curl -s {address}:8000/v2/models/ensemble/generate -d '{json.dumps(body)}'")
        out = http_json(f"http://{address}:8000/v2/models/ensemble/generate", "POST", body, timeout=120)
        text = str(out.get("text_output", ""))
        say(f"  text_output: {json.dumps(text)}")
        say("  (the tiny Llama has random weights: the text is real generation, not meaningful)")
        self.summary["sample"] = {"address": address, "request": body, "text": text}
        if not text.strip():
            raise StepError(f"the generate request returned no text: {out}")

    def _autoscaling(self) -> None:
        if not self._autoscaler_landed():
            say("the built-in autoscaler is not in this checkout yet: no scaling shown (not faked)")
            self.summary["notLanded"].append("built-in autoscaler")
            self.summary["autoscaling"] = None
            return
        watcher = DecisionWatcher(self)
        wait_for(
            lambda: self._autoscaling_status() is not None,
            timeout=60,
            desc=f"status.autoscaling of llmdeployment/{TINY_DEPLOYMENT} (the autoscaler reading metrics)",
        )
        say(
            f"load: {LOAD_CONCURRENCY} concurrent generate requests ({LOAD_MAX_TOKENS} new tokens each) "
            "through"
        )
        say("  tritonclient to the ready servers, round-robin as a Service would; each holds 4 of a")
        say("  replica's 32 KV blocks until it finishes, so one replica's pool fills and requests wait")
        load = LoadGenerator(
            self.ready_addresses, concurrency=LOAD_CONCURRENCY, max_tokens=LOAD_MAX_TOKENS, max_seconds=420
        ).start()
        try:
            peak = wait_for(
                lambda: (
                    watcher.poll() >= 2
                    and watcher.ready >= 2
                    and len(self.ready_addresses()) >= 2
                    and watcher.replicas
                ),
                timeout=240,
                interval=1.0,
                desc="the autoscaler to scale up to 2+ ready replicas with real servers",
            )
            wait_for(
                lambda: watcher.poll() is not None and watcher.stable(15),
                timeout=150,
                interval=1.0,
                desc="replicas to settle under load",
            )
            peak = max(peak, watcher.replicas)
            self._save_metrics_under_load()
        finally:
            load.stop()
        if isinstance(load.error, StepError):
            raise load.error
        if load.error is not None:
            raise StepError(f"the load generator stopped: {load.error}")
        st = load.stats
        say(
            f"load stopped: {st.ok} requests answered, {st.failed} failed"
            + (f" (last error: {st.last_error})" if st.failed else "")
        )
        if st.ok == 0:
            raise StepError(f"no request of the load was answered: {st.last_error}")
        wait_for(
            lambda: watcher.poll() == 1 and watcher.ready == 1,
            timeout=240,
            interval=1.0,
            desc="the autoscaler to scale back down to minReplicas 1",
        )
        decisions = watcher.decisions
        self.summary["autoscaling"] = {
            "peak": peak,
            "final": watcher.replicas,
            "decisions": decisions,
            "load": {"ok": st.ok, "failed": st.failed, "concurrency": LOAD_CONCURRENCY},
        }
        say(f"scaled 1 → {peak} under load and back to {watcher.replicas}; {len(decisions)} decisions")

    def _save_metrics_under_load(self) -> None:
        """One real server's /metrics page under load, to ``<work>/metrics-under-load.txt`` (how
        ``tests/fixtures/triton_metrics_cpu_standin.txt`` is captured: docs/triton-cpu.md)."""
        address = self.ready_addresses()[0]
        with urllib.request.urlopen(f"http://{address}:8002/metrics", timeout=10) as resp:
            page = resp.read().decode()
        (WORK / "metrics-under-load.txt").write_text(page)
        for line in page.splitlines():
            if line.startswith(("nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics")):
                say("  " + line)

    @staticmethod
    def _autoscaler_landed() -> bool:
        """Whether the operator in this checkout registers a handler that runs the autoscaling policy."""
        handlers = ROOT / "operator" / "src" / "trtllm_operator" / "handlers"
        modules = re.findall(
            r"from trtllm_operator\.handlers import (\w+)", (handlers / "__init__.py").read_text()
        )
        return any(
            "trtllm_operator.decide.autoscaling" in (handlers / f"{m}.py").read_text()
            for m in modules
            if (handlers / f"{m}.py").exists()
        )

    def _autoscaling_status(self) -> dict[str, Any] | None:
        status = self.custom("llmdeployments", TINY_DEPLOYMENT).get("status") or {}
        auto: dict[str, Any] | None = status.get("autoscaling")
        return auto

    # -- step 7 ---------------------------------------------------------------------------------
    def final_summary(self, n: int, total: int) -> None:
        with self.stage(n, total, "summary", "Summary"):
            say("$ kubectl get llm -n trtllm-demo -o wide")
            out = self.kubectl("get", "llm", "-n", NS, "-o", "wide").stdout
            for line in out.rstrip().splitlines():
                say("  " + line)
            self.summary["getLlm"] = out
            say("")
            cache = self.sh(
                [str(VENV_BIN / "trtllm-operator"), "cache", "list", "-n", NS],
                echo=lambda line: bool(line.strip()),
                show=True,
            )
            self.summary["cacheList"] = cache.stdout
            say("")
            big = self.summary.get("bigEngine") or {}
            plan = big.get("plan") or {}
            if plan:
                say(f"engine plan (operator, from config.json) for {BIG_ENGINE} on {big.get('gpuProduct')}:")
                for line in _plan_lines(plan):
                    say("  " + line)
            tiny_plan = (self.summary.get("tinyEngine") or {}).get("plan") or {}
            if tiny_plan:
                say(f"engine plan (engine-builder plan stage) for {TINY_ENGINE}:")
                for line in _plan_lines(tiny_plan):
                    say("  " + line)
                say("  (a 0.4 M-parameter model on an 80 GB GPU: nearly all memory goes to the KV cache)")
            auto = self.summary.get("autoscaling")
            say("")
            if auto:
                for line in decision_summary(auto["decisions"]):
                    say(line)
            else:
                say("autoscaling decisions: none shown (the built-in autoscaler is not in this checkout yet)")
            say("")
            say("real: control plane, Helm chart + RBAC, operator, engine-builder (fetch, inspect, plan,")
            say(
                "      ModelOpt FP8, TP-2 checkpoint, Triton repository, manifest), engine cache, scheduling,"
            )
            say("      tritonserver 2.51 on every Ready pod (launch.sh, mpirun, ensemble, tokenizer, HTTP,")
            say("      /metrics), generate requests and load, metrics scraping and autoscaler decisions")
            say("simulated or not run: " + "; ".join(self.summary["simulated"]))
            for item in self.summary["notLanded"]:
                say(f"not in this checkout yet: {item}")

    def go_further(self) -> None:
        # Absolute paths: the exports keep working after a cd (a new user's trial found the relative ones).
        kubeconfig = shlex.quote(str((CLUSTER_DIR / "kubeconfig").resolve()))
        venv_bin = shlex.quote(str(Path(sys.executable).parent.resolve()))
        bin_dir = shlex.quote(str(Path(self.bin_dir).resolve()))
        print(f"[{clock()}] ==> Go further", flush=True)
        say(f'export KUBECONFIG={kubeconfig} PATH={bin_dir}:{venv_bin}:"$PATH"')
        # Without -n, kubectl and `cache list` look in "default" and print nothing (a trial's finding).
        say(f"everything is in namespace {NS}: add -n {NS}, or make it the default:")
        say(f"kubectl config set-context --current --namespace {NS}")
        say("trtllm-operator cache list -n trtllm-demo")
        say("kubectl get llm,deploy,pods,jobs -n trtllm-demo -o wide")
        say(f"kubectl describe llmengine {BIG_ENGINE} -n trtllm-demo      # plan, conditions, events")
        sample = self.summary.get("sample")
        if sample:
            # A pod that still serves now: the sampled one may have gone in the scale-down (trials 42
            # and 50: the printed curl pointed at a removed pod), which the runner's state alone shows late.
            live: list[str] = []
            with contextlib.suppress(StepError):
                live = self.serving_addresses()
            address = sample["address"] if not live or sample["address"] in live else live[0]
            say(
                f'curl -s {address}:8000/v2/models/ensemble/generate -d \'{{"text_input": "Hello", '
                '"max_tokens": 32}\''
            )
            say(
                f'curl -sN {address}:8000/v2/models/ensemble/generate_stream -d \'{{"text_input": "Hello", '
                '"max_tokens": 32, "stream": true}\'   # one event per token'
            )
            say(f"curl -s {address}:8002/metrics | grep nv_trt_llm     # what the autoscaler reads")
            say(f"kubectl get llmd {TINY_DEPLOYMENT} -n trtllm-demo -w")
            say("  (the Service's ClusterIP is not routed here: no kube-proxy; send to a pod IP)")
        say("operator log: .local/demo/logs/operator.log; every step's output: .local/demo/logs/")
        say("on a real cluster with GPUs: kubectl create namespace llm; helm install trtllm-operator \\")
        say("    charts/trtllm-operator --namespace trtllm-system --create-namespace \\")
        say("    --set 'watchNamespaces={llm}'")
        say("  then kubectl apply -n llm -f examples/<scenario>.yaml (examples/README.md, docs/demo.md)")
        say("stop everything the demo started: make demo-down")


class DecisionWatcher:
    """Prints each new autoscaling decision and replica change of the autoscaled deployment."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.seen: set[str] = set()
        self.decisions: list[dict[str, Any]] = []
        self.replicas = 0
        self.ready = 0
        self.history: list[tuple[float, int]] = []

    def poll(self) -> int:
        obj = self.demo.custom("llmdeployments", TINY_DEPLOYMENT)
        status = obj.get("status") or {}
        auto = status.get("autoscaling") or {}
        previous = ""
        for d in auto.get("lastDecisions") or []:
            ident = json.dumps(d, sort_keys=True)
            if d.get("fromReplicas") == d.get("toReplicas"):
                # The newest hold is kept current by the operator (time, values, message): print it
                # once per reason after the entry it follows.
                ident = f"hold {d.get('toReplicas')} {d.get('reason')} after {previous}"
            previous = ident
            if ident in self.seen:
                continue
            self.seen.add(ident)
            self.decisions.append(d)
            signals = ", ".join(f"{k} {v:g}" for k, v in (d.get("signals") or {}).items())
            say(f"decision: {d.get('fromReplicas')} → {d.get('toReplicas')} ({d.get('reason')}) {signals}")
            if d.get("message"):
                say(f"  {d['message']}")
        replicas = int((obj.get("spec") or {}).get("replicas") or 0)
        ready = int(status.get("readyReplicas") or 0)
        if (replicas, ready) != (self.replicas, self.ready):
            targets = (((obj.get("spec") or {}).get("autoscaling") or {}).get("targets")) or {}
            say(f"replicas {replicas} (ready {ready}); {signal_readings(targets, auto)}")
            self.replicas, self.ready = replicas, ready
            self.history.append((time.monotonic(), replicas))
        return replicas

    def stable(self, seconds: float) -> bool:
        return bool(self.history) and time.monotonic() - self.history[-1][0] >= seconds


def decision_summary(decisions: list[dict[str, Any]]) -> list[str]:
    """The summary's autoscaling decisions: the ones :class:`DecisionWatcher` saw while it watched
    ``status.autoscaling.lastDecisions`` — not what that status holds at the end, which keeps only the
    latest and lets a hold replace the hold before it (docs/autoscaling.md, ``lastDecisions[]``), so
    the header says where they come from (fresh-user trial 42 F6)."""
    lines = [
        f"autoscaling decisions of llmdeployment/{TINY_DEPLOYMENT}, as observed while watching "
        "status.autoscaling (it keeps only the latest; a hold replaces the previous hold):"
    ]
    for d in decisions:
        signals = ", ".join(f"{k} {v:g}" for k, v in (d.get("signals") or {}).items())
        when = str(d.get("time", ""))[11:19]
        change = f"{d.get('fromReplicas')} → {d.get('toReplicas')}"
        lines.append(f"  {when}  {change}  {d.get('reason', '')}: {d.get('message') or signals}")
    return lines


def signal_readings(targets: dict[str, Any], auto: dict[str, Any]) -> str:
    """The autoscaler's signals as the demo prints them, from ``spec.autoscaling.targets`` and
    ``status.autoscaling``: each targeted signal with its reading and target, "no reading yet" while
    the status has none (no ready pod scraped yet); a signal that is not a target only when it has a
    reading (the demo scales on kvCacheUtilization alone: no "active/max -%" for a signal nobody
    measures)."""
    parts: list[str] = []
    for sig in SIGNALS:
        percent = auto.get(sig.percent_name)
        target = targets.get(sig.name)
        if target is None and percent is None:
            continue
        reading = "no reading yet" if percent is None else f"{percent}%"
        parts.append(f"{sig.name} {reading}" + ("" if target is None else f" (target {target * 100:g}%)"))
    return ", ".join(parts) or "no autoscaling signals"


def _wrap_command(argv: list[str], width: int = 88) -> list[str]:
    """A command as shell lines of at most ``width`` characters, never splitting ``--flag value``."""
    words: list[str] = []
    for arg in argv:
        if words and words[-1].startswith("--") and " " not in words[-1] and not arg.startswith("--"):
            words[-1] += " " + shlex.quote(arg)
        else:
            words.append(shlex.quote(arg))
    lines = [""]
    for word in words:
        if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
            lines[-1] += " \\"
            lines.append("    " + word)
        else:
            lines[-1] += (" " if lines[-1] else "") + word
    return lines


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _plan_lines(plan: dict[str, Any]) -> list[str]:
    """A few lines of a capacity plan (camelCase from status.plan or snake_case from the builder)."""

    def g(*names: str) -> Any:
        for name in names:
            if name in plan:
                return plan[name]
        return None

    lines = []
    w = g("weightBytesPerGPU", "weightBytesPerGpu", "weight_bytes_per_gpu")
    kv = g("kvCacheBytesPerGPU", "kvCacheBytesPerGpu", "kv_cache_bytes_per_gpu")
    tokens = g("maxKVTokens", "maxKvTokens", "max_kv_tokens")
    seqs = g("maxConcurrentSequences", "max_concurrent_sequences")
    seq_len = g("maxSeqLen", "max_seq_len") or (g("recommended") or {}).get("maxSeqLen")
    fits = g("fits")
    if w is not None:
        lines.append(f"weights per GPU {_bytes(w)}" + (f", KV cache per GPU {_bytes(kv)}" if kv else ""))
    if tokens is not None:
        lines.append(
            f"KV cache holds {tokens:,} tokens"
            + (f": {seqs:,} sequences of {seq_len:,} tokens" if seqs and seq_len else "")
        )
    if fits is not None:
        lines.append("fits: " + ("yes" if fits else "no"))
    if not lines:
        lines.append(json.dumps(plan, sort_keys=True)[:300])
    return lines


# ------------------------------------------------------------------------------------ down
def down(*, quiet: bool = False) -> int:
    """Stop the demo's processes (by recorded PID, checked against their command line) and its
    control plane. Returns 0 when nothing the demo started is left running."""
    left: list[str] = []
    for rec_path in sorted(PIDS.glob("*.json")) if PIDS.exists() else []:
        rec = json.loads(rec_path.read_text())
        pid, argv = int(rec["pid"]), [str(a) for a in rec["argv"]]
        marker = next((a for a in argv[1:] if "trtllm" in a), argv[0])
        if _pid_alive(pid) and marker in _cmdline(pid):
            os.kill(pid, signal.SIGTERM)
            # The pod runner stops every tritonserver it started before it exits.
            deadline = time.monotonic() + (120 if rec_path.stem == "triton-pods" else 10)
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.2)
            if not quiet:
                print(f"[demo] stopped {rec_path.stem} (pid {pid})", flush=True)
        if _pid_alive(pid) and marker in _cmdline(pid):
            left.append(f"{rec_path.stem} (pid {pid})")
        else:
            rec_path.unlink()
    with contextlib.suppress(OSError, ValueError):  # servers a killed pod runner left behind
        for name, pod in (json.loads(POD_STATE.read_text()).get("pods") or {}).items():
            if _pid_alive(int(pod["pid"])) and "tritonserver" in _cmdline(int(pod["pid"])) + "bash":
                tritoncpu.stop(int(pod["pid"]))
                if not quiet:
                    print(f"[demo] stopped the tritonserver of pod/{name} (pid {pod['pid']})", flush=True)
    # Python-backend shared memory the demo's servers left in /dev/shm (a crashed or killed server
    # does not unlink it): the names each server mapped, recorded by the pod runner; never a region
    # a live process still maps (tritoncpu.remove_shm_regions).
    records = sorted((WORK / "pods").glob("*.shm-regions")) if (WORK / "pods").exists() else []
    if records:
        removed = tritoncpu.remove_shm_regions(n for r in records for n in r.read_text().split())
        for record in records:
            record.unlink()
        if removed and not quiet:
            print(
                f"[demo] removed {len(removed)} shared-memory region(s) left by the demo's servers",
                flush=True,
            )
    if (CLUSTER_DIR / "state.json").exists():
        proc = subprocess.run(
            [str(ROOT / "hack" / "local-cluster"), "--work-dir", str(CLUSTER_DIR), "down"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if not quiet or proc.returncode != 0:
            print((proc.stdout + proc.stderr).rstrip(), flush=True)
        if proc.returncode != 0:
            left.append("local control plane (see above)")
    if left:
        print(f"[demo] ERROR: still running: {', '.join(left)}", file=sys.stderr, flush=True)
        return 1
    if not quiet:
        kept = f"; its files stay in {WORK} (rm -rf to delete)" if WORK.exists() else ""
        print(f"[demo] nothing of the demo is running{kept}", flush=True)
    return 0


# ------------------------------------------------------------------------------------ main
def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run() -> int:
    say("trtllm-operator demo: a local control plane with kwok-simulated GPU nodes, the operator,", indent=0)
    say("a real engine-builder run on this CPU, the engine cache, and the autoscaler.", indent=0)
    if PIDS.exists() or (CLUSTER_DIR / "state.json").exists():
        say("stopping the previous demo first (make demo-down)", indent=0)
        if down(quiet=True) != 0:
            return 1
    if WORK.exists():
        shutil.rmtree(WORK)
    LOGS.mkdir(parents=True)
    demo = Demo()
    steps = [
        demo.control_plane,
        demo.operator,
        demo.build_engine,
        demo.cache_import,
        demo.apply_examples,
        demo.autoscaling,
        demo.final_summary,
    ]
    try:
        for i, step in enumerate(steps, start=1):
            step(i, len(steps))
    except (StepError, subprocess.SubprocessError, OSError, KeyboardInterrupt, Exception) as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        st = demo.step
        what = f"step {st.number}/{st.total} ({st.title})" if st else "start-up"
        print(
            f"[{clock()}] FAILED at {what}: {'interrupted' if interrupted else exc}",
            file=sys.stderr,
            flush=True,
        )
        if st is not None and not interrupted:
            print(f"----- last lines of {st.log_path} -----", file=sys.stderr)
            print(_tail(st.log_path), file=sys.stderr)
        for name in ("operator", "triton-pods"):
            if (LOGS / f"{name}.log").exists() and not interrupted:
                print(f"----- last lines of {LOGS / f'{name}.log'} -----", file=sys.stderr)
                print(_tail(LOGS / f"{name}.log", 20), file=sys.stderr)
        demo.summary["result"] = "failed"
        demo.summary["failedStep"] = st.slug if st else None
        demo.summary["error"] = str(exc)
        (WORK / "summary.json").write_text(json.dumps(demo.summary, indent=2, default=str))
        print(
            "[demo] what was started is still running for inspection; stop it with: make demo-down",
            file=sys.stderr,
        )
        return 130 if interrupted else 1
    total = time.monotonic() - _START
    demo.summary["result"] = "ok"
    demo.summary["seconds"] = round(total, 1)
    (WORK / "summary.json").write_text(json.dumps(demo.summary, indent=2, default=str))
    if os.environ.get("TRTLLM_DEMO_KEEP", "1") == "0":
        print(f"[{clock()}] TRTLLM_DEMO_KEEP=0: stopping everything", flush=True)
        if down() != 0:
            return 1
    else:
        demo.go_further()
    steps_line = ", ".join(f"{s['step']} {s['seconds']:.0f}s" for s in demo.steps)
    print(f"[{clock()}] DEMO OK in {int(total // 60)} min {int(total % 60)} s ({steps_line})", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["down"]:
        return down()
    if argv:
        print("usage: hack/demo.sh [down]", file=sys.stderr)
        return 2
    return run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
