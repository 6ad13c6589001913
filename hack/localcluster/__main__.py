"""``hack/local-cluster up|down|status|env`` — see docs/local-cluster.md."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from .controlplane import DEFAULT_WORK_DIR, ClusterError, ControlPlane
from .testbin import find_bin_dir


def _err(msg: str) -> None:
    print(f"[local-cluster] ERROR: {msg}", file=sys.stderr, flush=True)


def _running(work_dir: Path) -> ControlPlane | None:
    cp = ControlPlane.load(work_dir)
    if cp is not None and cp.pids and all(cp.alive().values()):
        return cp
    return None


def cmd_up(args: argparse.Namespace) -> int:
    work_dir: Path = args.work_dir
    running = _running(work_dir)
    if running is not None:
        print(f"[local-cluster] already running at {running.server}; kubeconfig {running.kubeconfig}")
        return 0
    stale = ControlPlane.load(work_dir)
    if stale is not None:
        stale.stop()  # leftover of a crashed cluster: end whatever of it still runs
    if work_dir.exists():
        ControlPlane(work_dir=work_dir, bin_dir=Path()).remove()
    try:
        bin_dir = find_bin_dir()
        cp = ControlPlane(work_dir=work_dir, bin_dir=bin_dir, detach=True)
        cp.start(timeout=args.timeout)
    except ClusterError as exc:
        _err(str(exc))
        return 1
    out = cp.kubectl("get", "nodes", "-L", "nvidia.com/gpu.product", "-L", "nvidia.com/gpu.count")
    print(out.stdout, end="")
    print(f"[local-cluster] logs in {cp.logs_dir}")
    print(f'[local-cluster] use it: eval "$({env_command(work_dir)})"  (export KUBECONFIG={cp.kubeconfig})')
    return 0


def env_command(work_dir: Path) -> str:
    """The ``env`` command for the cluster in ``work_dir``: with ``--work-dir`` unless it is the default
    (``env`` without it reads the default directory)."""
    if work_dir.resolve() == DEFAULT_WORK_DIR.resolve():
        return "hack/local-cluster env"
    return f"hack/local-cluster --work-dir {shlex.quote(str(work_dir))} env"


def cmd_down(args: argparse.Namespace) -> int:
    cp = ControlPlane.load(args.work_dir)
    if cp is None:
        print(f"[local-cluster] no cluster recorded in {args.work_dir}")
        return 0
    killed = cp.stop()
    left = [n for n, alive in cp.alive().items() if alive]
    if left:
        _err(f"still running: {left}")
        return 1
    print(
        "[local-cluster] stopped" + (f" (killed after grace period: {', '.join(killed)})" if killed else "")
    )
    if not args.keep:
        cp.remove()
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cp = ControlPlane.load(args.work_dir)
    if cp is None:
        print(f"[local-cluster] no cluster recorded in {args.work_dir}")
        return 1
    desc = cp.describe()
    if args.json:
        print(json.dumps(desc, indent=2))
    else:
        print(f"server:     {desc['server']}")
        print(f"kubeconfig: {desc['kubeconfig']}")
        for name, c in desc["components"].items():
            state = "running" if c["running"] else "NOT running"
            print(f"  {name:<24} pid {c['pid']!s:<8} {state:<12} {c['log']}")
    return 0 if all(c["running"] for c in desc["components"].values()) else 1


def cmd_env(args: argparse.Namespace) -> int:
    """Print the exports for ``eval``; exit 1 with a hint on stderr when no cluster is recorded (the
    kubeconfig would not exist and kubectl would not be on PATH)."""
    cp = ControlPlane.load(args.work_dir)
    if cp is None:
        print(
            f"[local-cluster] no cluster recorded in {args.work_dir.resolve()}: start one with "
            "hack/local-cluster up (or pass the --work-dir of a running one, e.g. .local/demo/cluster "
            "for make demo)",
            file=sys.stderr,
        )
        return 1
    kubeconfig = (args.work_dir / "kubeconfig").resolve()
    print(f"export KUBECONFIG={shlex.quote(str(kubeconfig))}")
    print(f'export PATH={shlex.quote(str(Path(cp.bin_dir).resolve()))}:"$PATH"')
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/local-cluster", description=__doc__)
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=DEFAULT_WORK_DIR,
        help=f"cluster state, logs, kubeconfig (default {DEFAULT_WORK_DIR})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser(
        "up", help="start etcd, kube-apiserver, controller-manager, scheduler, kwok and the nodes"
    )
    up.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for each component (default 180)"
    )
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop every process of the cluster (by PID) and delete its work dir")
    down.add_argument("--keep", action="store_true", help="keep the work dir (logs, etcd data)")
    down.set_defaults(func=cmd_down)
    status = sub.add_parser("status", help="show components, PIDs and logs; exit 1 unless all run")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    env = sub.add_parser("env", help="print `export KUBECONFIG=...` (and PATH with kubectl) for eval")
    env.set_defaults(func=cmd_env)
    args = parser.parse_args(argv)
    args.work_dir = args.work_dir.resolve()
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
