"""``python -m trtllm_operator.emulator``: serve emulated Triton metrics until interrupted.

Exit codes: 0 on SIGINT/SIGTERM, 2 on bad arguments or an address that cannot be bound.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from types import FrameType

from trtllm_operator.emulator.model import Control, ServingProfile
from trtllm_operator.emulator.server import ControlServer, Fleet, LoadFileWatcher, PodFollower


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trtllm_operator.emulator",
        description="Serve Triton Inference Server /metrics (TensorRT-LLM backend families) driven by a "
        "load model, one endpoint per address.",
    )
    parser.add_argument(
        "--bind",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="address of one emulated pod, e.g. a kwok pod IP 127.1.0.5 (repeatable)",
    )
    parser.add_argument(
        "--port", type=int, default=8002, help="metrics port of every endpoint (default 8002)"
    )
    parser.add_argument(
        "--arrival-rate",
        type=float,
        default=0.0,
        help="initial total arrival rate, requests/s, split evenly over the endpoints (default 0)",
    )
    parser.add_argument("--load-file", type=Path, help="JSON/YAML control document, re-read when it changes")
    parser.add_argument("--control-port", type=int, help="serve the JSON control API on this port")
    parser.add_argument(
        "--control-bind", default="127.0.0.1", help="address of the control API (default 127.0.0.1)"
    )
    parser.add_argument("--follow-namespace", help="follow pods in this namespace (with --follow-selector)")
    parser.add_argument("--follow-selector", help="label selector of the pods to emulate, e.g. app=triton")
    parser.add_argument("--kubeconfig", help="kubeconfig for --follow-* (default: $KUBECONFIG)")
    parser.add_argument("--tick-seconds", type=float, default=0.1, help="load-model step (default 0.1 s)")
    parser.add_argument("-v", "--verbose", action="store_true")
    profile = parser.add_argument_group("serving profile (one replica)")
    defaults = ServingProfile()
    for f in fields(ServingProfile):
        kind = float if isinstance(getattr(defaults, f.name), float) else int
        profile.add_argument(
            f"--{f.name.replace('_', '-')}",
            dest=f"profile_{f.name}",
            type=kind,
            metavar="X" if kind is float else "N",
            default=getattr(defaults, f.name),
            help=f"default {getattr(defaults, f.name)}",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s"
    )
    if bool(args.follow_namespace) != bool(args.follow_selector):
        print("--follow-namespace and --follow-selector go together", file=sys.stderr)
        return 2
    try:
        profile = ServingProfile(
            **{f.name: getattr(args, f"profile_{f.name}") for f in fields(ServingProfile)}
        )
        control = Control(arrival_rate=args.arrival_rate)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    fleet = Fleet(profile, port=args.port, control=control, tick_seconds=args.tick_seconds).start()
    stoppers = [fleet.stop]
    try:
        for address in args.bind:
            fleet.add(address)
        if args.load_file:
            stoppers.insert(0, LoadFileWatcher(fleet, args.load_file).start().stop)
        if args.control_port is not None:
            server = ControlServer(fleet, args.control_port, args.control_bind).start()
            logging.info(
                "control API on http://%s:%d (GET /state, PUT /load)", args.control_bind, server.port
            )
            stoppers.insert(0, server.stop)
        if args.follow_namespace:
            from kubernetes import client, config  # noqa: PLC0415 - only needed with --follow-*

            config.load_kube_config(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
            follower = PodFollower(
                fleet, client.CoreV1Api(), args.follow_namespace, args.follow_selector
            ).start()
            stoppers.insert(0, follower.stop)
    except OSError as exc:
        print(f"cannot bind: {exc}", file=sys.stderr)
        for stop in stoppers:
            stop()
        return 2
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    done.wait()
    for stop in stoppers:
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
