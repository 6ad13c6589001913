"""``trtllm-operator run``: start the operator (kopf) with every handler of this package.

    trtllm-operator run [--namespace NS ...|--all-namespaces] [--kubeconfig PATH] [--standalone|--peering]
                        [--max-concurrent-builds N] [--builder-image IMAGE] [--liveness-port PORT]
                        [--metrics-port PORT] [--log-format text|json] [--verbose]

Flags override ``TRTLLM_OPERATOR_*`` environment variables (:mod:`trtllm_operator.settings`).
The liveness endpoint (kopf's) answers ``GET http://0.0.0.0:PORT/healthz`` once the operator
is running. :func:`run_operator` is the same entry point without argument parsing; the test
fixture (``tests/support/operator.py``) runs it in a thread with a stop flag.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from typing import Any

from trtllm_operator.settings import Settings, SettingsError

log = logging.getLogger(__name__)

#: ``run``'s exit code when the API server does not answer (:func:`~trtllm_operator.kube.client.
#: wait_for_api_server`); 2 is a bad flag, setting or kubeconfig (:data:`~trtllm_operator.commands.
#: EXIT_BAD_INPUT`).
EXIT_UNREACHABLE = 1
#: ``run``'s exit code when the API server refuses the credentials (401) or what kopf would watch
#: (:func:`~trtllm_operator.kube.access.wait_for_access`), as kopf's own exit after its retries.
EXIT_FORBIDDEN = 1

_metrics_started = False  # the operator's registry (metrics.operator_metrics) is served once
_metrics_lock = threading.Lock()


DESCRIPTION = """\
Start the operator (kopf) with every handler: it watches LLMEngines and LLMDeployments and runs
until interrupted (SIGINT/SIGTERM).

Every flag overrides its TRTLLM_OPERATOR_* environment variable (e.g. --max-concurrent-builds and
TRTLLM_OPERATOR_MAX_CONCURRENT_BUILDS; docs/operator.md lists them all). With --liveness-port the
endpoint GET http://<listen address>:PORT/healthz answers once the operator runs; --metrics-port
serves Prometheus /metrics.

Before kopf starts, the kubeconfig (--kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in a
pod the service account) must load (else exit 2) and the API server must answer: it is retried for
about a minute, as kopf retries its requests, then run exits 1 with one line naming the server, the
reason and the attempts. Then the credentials must be allowed to list and watch what the operator
watches (a SelfSubjectAccessReview each): asked again for about a minute, then run exits 1 with one line
naming every missing permission.
"""


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run the operator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace",
        "-n",
        action="append",
        dest="namespaces",
        metavar="NS",
        help="watch this namespace (repeatable); default: TRTLLM_OPERATOR_NAMESPACES or all",
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch the whole cluster")
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig (default: $KUBECONFIG, else ~/.kube/config; in a pod without either, the "
        "in-cluster service account), as cache import and cache list take it",
    )
    peering = p.add_mutually_exclusive_group()
    peering.add_argument(
        "--standalone",
        dest="standalone",
        action="store_true",
        default=None,
        help="run without kopf peering: this process assumes it is the only operator replica "
        "(the default; the chart runs 1 replica with the Recreate strategy)",
    )
    peering.add_argument(
        "--peering",
        dest="standalone",
        action="store_false",
        help="use kopf peering, so that of several replicas only one handles objects at a time",
    )
    p.add_argument(
        "--max-concurrent-builds",
        type=int,
        metavar="N",
        help="builder Jobs running at once (default 2); further LLMEngines wait in phase Queued",
    )
    p.add_argument(
        "--builder-image",
        metavar="IMAGE",
        help="image of builder Jobs (default: each LLMEngine's spec.runtime.image)",
    )
    p.add_argument(
        "--gpu-catalog-configmap",
        metavar="NAME",
        help="ConfigMap in the operator's namespace adding GPU products to the built-in catalog",
    )
    p.add_argument(
        "--gpu-catalog-file", metavar="PATH", help="YAML/JSON file adding GPU products to the catalog"
    )
    p.add_argument("--liveness-port", type=int, metavar="PORT", help="0 disables the endpoint")
    p.add_argument("--metrics-port", type=int, metavar="PORT", help="0 disables /metrics")
    p.add_argument("--log-format", choices=["text", "json"], help="log line format (default text)")
    p.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    p.set_defaults(func=_main)


def settings_from_args(args: argparse.Namespace, base: Settings | None = None) -> Settings:
    """Environment settings with the flags in ``args`` applied."""
    base = base if base is not None else Settings.from_env()
    overrides: dict[str, Any] = {
        "standalone": args.standalone,
        "max_concurrent_builds": args.max_concurrent_builds,
        "builder_image": args.builder_image,
        "gpu_catalog_configmap": args.gpu_catalog_configmap,
        "gpu_catalog_file": args.gpu_catalog_file,
        "log_format": args.log_format,
        "log_level": "DEBUG" if args.verbose else None,
    }
    if args.all_namespaces:
        overrides["namespaces"] = ()
    elif args.namespaces:
        overrides["namespaces"] = tuple(args.namespaces)
    settings = base.with_overrides(**overrides)
    for flag, value in (("--liveness-port", args.liveness_port), ("--metrics-port", args.metrics_port)):
        if value is not None and not 0 <= value <= MAX_PORT:  # as the settings' own bounds (trial 50 X6)
            raise SettingsError(f"{flag} {value}: out of range 0–{MAX_PORT}; pass a port, or 0 to disable it")
    # 0 on the command line means "off" (None is "not given").
    ports = {
        k: (None if v == 0 else v)
        for k, v in (("liveness_port", args.liveness_port), ("metrics_port", args.metrics_port))
        if v is not None
    }
    return settings.model_copy(update=ports) if ports else settings


MAX_PORT = 65535
#: The endpoints run binds, as (setting, flag, what it serves): :func:`check_ports`.
_ENDPOINTS = (
    ("metrics_port", "--metrics-port", "/metrics"),
    ("liveness_port", "--liveness-port", "the liveness endpoint"),
)


def check_ports(settings: Settings, args: argparse.Namespace) -> None:
    """Raise :class:`SettingsError` (one line naming the flag or variable, the port and the reason)
    when an enabled liveness or metrics port cannot be bound on ``settings.listen_address``: the same
    port for both, or a bind that fails (in use, no permission). Without this, kopf's liveness
    endpoint or the /metrics server failed after startup with a 28–65-line traceback (fresh-user
    trial 50 X6). The probe binds with SO_REUSEADDR, as both servers do (aiohttp's TCPSite,
    http.server's allow_reuse_address), and closes at once."""
    import socket  # noqa: PLC0415

    from trtllm_operator.settings import ENV_PREFIX  # noqa: PLC0415

    def name(field: str, flag: str) -> str:
        return flag if getattr(args, field, None) is not None else ENV_PREFIX + field.upper()

    enabled = [
        (name(field, flag), getattr(settings, field), serves)
        for field, flag, serves in _ENDPOINTS
        if getattr(settings, field)
    ]
    if len(enabled) == 2 and enabled[0][1] == enabled[1][1]:
        raise SettingsError(
            f"{enabled[1][0]} {enabled[1][1]}: {enabled[0][0]} has the same port; give each endpoint "
            "its own, or 0 to disable one"
        )
    for who, port, serves in enabled:
        try:
            infos = socket.getaddrinfo(
                settings.listen_address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            family, kind, proto, _, address = infos[0]
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise SettingsError(
                f"{who} {port}: cannot listen on {settings.listen_address}:{port} for {serves} "
                f"({reason.lower()}); pass another port, or 0 to disable it"
            ) from exc


def _main(args: argparse.Namespace) -> int:
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    from trtllm_operator.commands import EXIT_BAD_INPUT, say  # noqa: PLC0415
    from trtllm_operator.commands._kubeconfig import KubeconfigError, load_client  # noqa: PLC0415
    from trtllm_operator.kube.access import (  # noqa: PLC0415
        AccessDeniedError,
        credentials_refused,
        wait_for_access,
    )
    from trtllm_operator.kube.client import (  # noqa: PLC0415
        API_ERROR_BACKOFFS,
        CONNECTIONS,
        ApiServerUnreachableError,
        Kube,
        api_message,
        set_default_kube,
        wait_for_api_server,
    )

    try:
        settings = settings_from_args(args)
        check_ports(settings, args)  # before the API server wait and kopf (trial 50 X6)
    except SettingsError as exc:
        say("run", "error", str(exc))  # on stderr, as every other refusal of run (trial 50 X11)
        return EXIT_BAD_INPUT
    # The cluster's credentials, checked before kopf starts, as `cache list` checks them: kopf
    # retries a failing login handler every 15 s, forever, logging the client library's traceback
    # (kopf 1.45.2 kopf/_core/engines/activities.py run_activity: a handler's exception is
    # temporary unless it is kopf.PermanentError, kopf/_core/actions/execution.py), and with
    # --metrics-port the /metrics authorizer's client raised that traceback first (fresh-user
    # trial 48 V3). In a pod without a kubeconfig this is the in-cluster service account.
    try:
        api_client = load_client(args.kubeconfig, connections=CONNECTIONS)
    except KubeconfigError as exc:
        say("run", "error", str(exc))
        return EXIT_BAD_INPUT
    # The API server, reached before kopf starts: kopf retries an unreachable one as this does
    # (API_ERROR_BACKOFFS, about 57 s), then fails with ~250 lines of tracebacks (fresh-user trial 49
    # W2); this ends with one line naming the server, the reason and the attempts. In a pod, the exit
    # is a restart, as kopf's was.
    try:
        wait_for_api_server(api_client, API_ERROR_BACKOFFS, on_retry=lambda note: say("run", "note", note))
    except ApiServerUnreachableError as exc:
        say("run", "error", str(exc))
        api_client.close()
        return EXIT_UNREACHABLE
    # What kopf will watch, allowed to these credentials, asked before kopf starts: kopf retries a
    # 403 as a failed connection and then stops with a traceback per watch (kube/access.py; fresh-user
    # trial 51 Y11: 1,144 lines for a token without RBAC); this ends with one line naming what is missing.
    try:
        wait_for_access(
            api_client,
            watch_access(settings, api_client),
            API_ERROR_BACKOFFS,
            on_retry=lambda note: say("run", "note", note),
            sleep=time.sleep,
        )
    except AccessDeniedError as exc:
        say("run", "error", str(exc))
        api_client.close()
        return EXIT_FORBIDDEN
    except ApiException as exc:
        if exc.status == 401:  # the credentials themselves: kopf would log in, fail and trace back
            say("run", "error", credentials_refused(str(api_client.configuration.host), exc.reason))
            api_client.close()
            return EXIT_FORBIDDEN
        # no review could be made: kopf says what it may not watch
        say("run", "note", f"the operator's permissions were not checked: {api_message(exc)}")
    # The client checked is the operator's: its handlers, kopf's login (handlers.startup.login) and
    # the /metrics authorizer all use the process-wide one (kube.client.default_kube).
    set_default_kube(Kube(api_client, settings.field_manager))
    try:
        run_operator(settings)
    except SettingsError as exc:
        say("run", "error", str(exc))
        return EXIT_BAD_INPUT
    return 0


def watch_access(settings: Settings, api_client: Any) -> list[Any]:
    """The permissions (:class:`trtllm_operator.kube.access.Access`) kopf needs for the watches of the
    operator's handlers under ``settings``: kopf's watched selectors
    (:func:`trtllm_operator.handlers.kopfsession.watched_selectors`, the handler registry's own), each
    resolved through ``api_client``'s discovery, in ``settings.namespaces`` (none: cluster-wide).
    Imports the handlers, with ``settings`` made the process-wide settings first, as
    :func:`run_operator` does."""
    import kopf  # noqa: PLC0415

    from trtllm_operator.kube.access import discovery, wanted  # noqa: PLC0415
    from trtllm_operator.settings import configure  # noqa: PLC0415

    configure(settings)
    import trtllm_operator.handlers  # noqa: F401, PLC0415 - importing registers the handlers
    from trtllm_operator.handlers.kopfsession import watched_selectors  # noqa: PLC0415

    watched = [
        (s.group or "", s.version or "", str(s.plural or s.kind or s.singular or s.shortcut or s.any_name))
        for s in watched_selectors(kopf.get_default_registry())
    ]
    return wanted(watched, discovery(api_client), settings.namespaces)


def run_operator(
    settings: Settings,
    *,
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
    configure_logging: bool = True,
) -> None:
    """Run kopf with this package's handlers until ``stop_flag`` is set (or a signal arrives).

    ``settings`` become the process-wide settings (:func:`trtllm_operator.settings.configure`)
    before the handlers are imported. Blocks; safe to call from a non-main thread.
    """
    import kopf  # noqa: PLC0415 - heavy import, only for this sub-command

    from trtllm_operator.settings import configure  # noqa: PLC0415

    configure(settings)
    if configure_logging:
        from trtllm_operator.logging import configure_logging as configure_log_lines  # noqa: PLC0415

        configure_log_lines(settings.log_format, settings.log_level)
    import trtllm_operator.handlers  # noqa: F401, PLC0415 - importing registers the handlers
    from trtllm_operator.handlers import readiness, release, watchstream  # noqa: PLC0415

    # kopf's index-readiness gate without its quadratic wake-ups at a restart (handlers/readiness.py).
    readiness.install()
    # kopf's watch events without managedFields (handlers/watchstream.py).
    watchstream.install()
    # The release stamp's source digest, read before kopf's handler threads first ask for it.
    release.code_digest()

    _start_metrics(settings)
    liveness = (
        f"http://{settings.listen_address}:{settings.liveness_port}/healthz"
        if settings.liveness_port
        else None
    )
    log.info(
        "starting trtllm-operator: %s, max %d concurrent builds",
        "cluster-wide" if settings.clusterwide else "namespaces " + ",".join(settings.namespaces),
        settings.max_concurrent_builds,
    )
    kopf.run(
        # Every handler of one cause runs in the same cycle (kopf's default, ``asap``, runs one per
        # cycle and stores the progress of each in an annotation patch before the next): an
        # LLMDeployment's creation (its controller and the autoscaler) then costs one bookkeeping
        # patch — the diff-base annotation — instead of one per handler (benchmarks/scale.py).
        # kopf 1.45.2, kopf/_core/actions/lifecycles.py (asap, all_at_once).
        lifecycle=kopf.lifecycles.all_at_once,
        standalone=settings.standalone,
        clusterwide=settings.clusterwide,
        namespaces=settings.namespaces,
        liveness_endpoint=liveness,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )


def _start_metrics(settings: Settings) -> None:
    """The /metrics exporter on ``settings.metrics_port``: over HTTPS when ``metrics_secure``
    (:mod:`trtllm_operator.kube.metrics_tls`), and with ``metrics_auth`` only for clients the API
    server authenticates and authorizes (:mod:`trtllm_operator.kube.metrics_auth`).

    Raises :class:`SettingsError` when the certificate directory's files do not load."""
    global _metrics_started  # noqa: PLW0603 - the exporter can be started once per process
    if not settings.metrics_port:
        return
    with _metrics_lock:
        if _metrics_started:
            return
        from trtllm_operator.kube.client import default_kube  # noqa: PLC0415
        from trtllm_operator.kube.metrics_auth import MetricsAuthorizer, serve_metrics  # noqa: PLC0415
        from trtllm_operator.kube.metrics_tls import ServingCertificate  # noqa: PLC0415
        from trtllm_operator.metrics.operator_metrics import REGISTRY  # noqa: PLC0415

        try:
            tls = ServingCertificate(settings.metrics_cert_dir) if settings.metrics_secure else None
        except ValueError as exc:
            raise SettingsError(str(exc)) from exc
        authorizer = MetricsAuthorizer(default_kube().api_client) if settings.metrics_auth else None
        serve_metrics(settings.metrics_port, settings.listen_address, REGISTRY, authorizer, tls)
        log.info(
            "serving /metrics on %s://%s:%d (certificate: %s)",
            "https" if tls else "http",
            settings.listen_address,
            settings.metrics_port,
            tls.source if tls else "none",
        )
        _metrics_started = True
