"""``hack/triton-cpu``: start a real tritonserver on the CPU for a model repository, stop it by PID.

    hack/triton-cpu start --model-repository DIR [--address 127.1.0.5] [--http-port 8000]
                          [--grpc-port 8001] [--metrics-port 8002] [--work-dir DIR] [--wait SECONDS]
        prints the server's PID (the leader of its own session) on stdout, its log path on stderr
    hack/triton-cpu stop PID
    hack/triton-cpu runtime      install the runtime if needed, print its directory

Exit codes: 0 ok, 1 the server did not become ready (its log tail on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tritoncpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/triton-cpu", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start tritonserver; prints its PID")
    start.add_argument("--model-repository", required=True, type=Path)
    start.add_argument("--address", default="127.0.0.1", help="address for HTTP, gRPC and metrics")
    start.add_argument("--http-port", type=int, default=8000)
    start.add_argument("--grpc-port", type=int, default=8001)
    start.add_argument("--metrics-port", type=int, default=8002)
    start.add_argument("--work-dir", type=Path, help="backends/ and tritonserver.log (default: a temp dir)")
    start.add_argument("--wait", type=float, default=300, help="seconds to wait for ready (0: do not wait)")
    stop = sub.add_parser("stop", help="stop a server by PID (SIGTERM, SIGKILL after 30 s)")
    stop.add_argument("pid", type=int)
    sub.add_parser("runtime", help="install the runtime if needed and print its directory")
    args = parser.parse_args(argv)
    try:
        if args.command == "runtime":
            print(tritoncpu.runtime())
            return 0
        if args.command == "stop":
            killed = tritoncpu.stop(args.pid)
            print(f"stopped {args.pid}" + (" (had to SIGKILL)" if killed else ""), file=sys.stderr)
            return 0
        if not args.model_repository.is_dir():
            print(f"--model-repository {args.model_repository}: not a directory", file=sys.stderr)
            return 2
        server = tritoncpu.start(
            args.model_repository,
            address=args.address,
            http_port=args.http_port,
            grpc_port=args.grpc_port,
            metrics_port=args.metrics_port,
            work_dir=args.work_dir,
        )
        print(
            f"tritonserver pid {server.pid} on {server.url} (metrics {server.metrics_url}); "
            f"log {server.log_path}",
            file=sys.stderr,
        )
        if args.wait > 0:
            server.wait_ready(args.wait)
            print("ready", file=sys.stderr)
        print(server.pid)
        return 0
    except tritoncpu.TritonError as exc:
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
