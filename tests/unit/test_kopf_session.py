"""Issue #20, the burst's peak RSS: kopf's session to the API server has a bounded number of
connections (handlers/kopfsession.py, handlers/startup.py ``login``), and the bound leaves room
for requests beside every watch stream kopf 1.45.2 opens.

* The login handler hands kopf its own session (kopf's ``APIContext`` construction) with only the
  connector's limit changed: the same headers, token, timeouts, TLS context — and the client
  certificate really presented in a TLS handshake.
* The watch-stream count is derived from kopf's handler registry and settings: kopf's own
  observers and orchestrator, run on a simulated cluster with this operator's registry, open at
  most that many streams (exactly that many when every resource is namespaced), cluster-wide and
  namespaced, with and without peering and scanning; a new watched resource raises the count.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import inspect
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import kopf
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import fetching, scanning
from kopf._cogs.clients.auth import APIContext
from kopf._cogs.structs import references
from kopf._core.engines import peering
from kopf._core.reactor import observation, orchestration, queueing
from kubernetes import client
from support.kopf_settings import configured_settings

import trtllm_operator.handlers  # noqa: F401 - registers every handler in kopf's default registry
from trtllm_operator import settings as operator_settings
from trtllm_operator.handlers import kopfsession, startup
from trtllm_operator.kube import Kube, set_default_kube
from trtllm_operator.settings import Settings

CLIENT_NAME = "trtllm-operator-test-client"
TOKEN = "t0ken-of-the-operator"
NAMESPACES = ("ml", "research")


# -- credentials: a CA, the API server's certificate, the operator's client certificate ----------


def _key_and_cert(
    tmp: Path, name: str, issuer: tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None, **kind: Any
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[1].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is None:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if kind.get("server"):
        san = x509.SubjectAlternativeName([x509.DNSName("localhost")])
        builder = builder.add_extension(san, critical=False)
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    if kind.get("client"):
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    cert = builder.sign(issuer[0] if issuer else key, hashes.SHA256())
    (tmp / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / f"{name}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return key, cert


@pytest.fixture
def credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The operator's API client as a kubeconfig with a CA, a client certificate and a token would
    configure it, and the operator's settings watching :data:`NAMESPACES`; ``tmp_path`` holds
    ``ca``, ``server`` and :data:`CLIENT_NAME` ``.crt``/``.key``."""
    ca = _key_and_cert(tmp_path, "ca", None)
    _key_and_cert(tmp_path, "server", ca, server=True)
    _key_and_cert(tmp_path, CLIENT_NAME, ca, client=True)
    cfg = client.Configuration()
    cfg.host = "https://localhost:6443"
    cfg.ssl_ca_cert = str(tmp_path / "ca.crt")
    cfg.cert_file = str(tmp_path / f"{CLIENT_NAME}.crt")
    cfg.key_file = str(tmp_path / f"{CLIENT_NAME}.key")
    cfg.api_key = {"authorization": f"Bearer {TOKEN}"}
    set_default_kube(Kube(client.ApiClient(cfg)))
    monkeypatch.setattr(operator_settings, "_current", Settings.model_validate({"namespaces": NAMESPACES}))
    try:
        yield tmp_path
    finally:
        set_default_kube(None)


# -- what a session is made of ---------------------------------------------------------------------


def _tls(context: ssl.SSLContext) -> dict[str, Any]:
    return {
        "protocol": context.protocol,
        "verify_mode": context.verify_mode,
        "check_hostname": context.check_hostname,
        "options": context.options,
        "verify_flags": context.verify_flags,
        "minimum_version": context.minimum_version,
        "maximum_version": context.maximum_version,
        "ca_certs": context.get_ca_certs(),
        "ciphers": [c["name"] for c in context.get_ciphers()],
    }


def _value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str | bytes | frozenset | tuple):
        return value
    if isinstance(value, ssl.SSLContext):
        return _tls(value)
    if isinstance(value, aiohttp.ClientTimeout | type) or (
        callable(value) and not hasattr(value, "__dict__")
    ):
        return value
    if hasattr(value, "items") and type(value).__name__.endswith("MultiDict"):
        return sorted(value.items())
    return type(value).__name__  # loop-bound or stateful objects: their kind only


def _fingerprint(obj: Any) -> dict[str, Any]:
    """Every attribute aiohttp keeps of its constructor arguments, comparable across two objects."""
    return {name: _value(value) for name, value in vars(obj).items()}


def _handshake(client_context: ssl.SSLContext, ca: Path) -> dict[str, Any]:
    """The client certificate a TLS server requiring one (the API server's, signed by ``ca``) sees
    when ``client_context`` connects to "localhost" (in memory, no socket)."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca / "ca.crt")
    server_context.load_cert_chain(ca / "server.crt", ca / "server.key")
    server_context.verify_mode = ssl.CERT_REQUIRED
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    tls_client = client_context.wrap_bio(c_in, c_out, server_hostname="localhost")
    tls_server = server_context.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end in (("client", tls_client), ("server", tls_server)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            break
    assert all(done.values()), f"the TLS handshake did not finish: {done}"
    return tls_server.getpeercert() or {}


def test_login_hands_kopf_its_own_session_with_a_bounded_pool(credentials: Path) -> None:
    kopf_settings = configured_settings()
    streams = kopfsession.watch_streams(kopf.get_default_registry(), kopf_settings, NAMESPACES)

    async def scenario() -> tuple[dict[str, Any], ...]:
        handed = startup.login(settings=kopf_settings)  # kopf calls sync and async handlers alike
        handed = await handed if inspect.isawaitable(handed) else handed
        assert isinstance(handed, kopf.AiohttpSession), "kopf is handed a session, not credentials"
        ours, default = APIContext(handed), APIContext(startup.connection_info())  # as kopf makes them
        try:
            assert ours.session.connector is not None and default.session.connector is not None
            limits = (ours.session.connector.limit, default.session.connector.limit)
            assert limits == (streams + kopfsession.REQUEST_CONNECTIONS, 0), "kopf's own has none"
            assert (ours.server, ours.default_namespace) == (default.server, default.default_namespace)
            info = startup.connection_info()
            assert (handed.priority, handed.expiration) == (info.priority, info.expiration)
            sessions = (_fingerprint(ours.session), _fingerprint(default.session))
            connectors = [_fingerprint(c) for c in (ours.session.connector, default.session.connector)]
            for connector in connectors:
                connector.pop("_limit")
            ssl_context = ours.session.connector._ssl  # type: ignore[attr-defined]
            assert isinstance(ssl_context, ssl.SSLContext)
            return (*sessions, *connectors, _handshake(ssl_context, credentials))
        finally:
            await ours.close()
            await default.close()

    ours, default, our_connector, default_connector, peer = asyncio.run(scenario())
    assert ours == default
    assert our_connector == default_connector
    assert dict(ours["_default_headers"])["Authorization"] == f"Bearer {TOKEN}"
    assert our_connector["_ssl"]["verify_mode"] == ssl.CERT_REQUIRED
    assert peer["subject"] == ((("commonName", CLIENT_NAME),),), "the client certificate is presented"
    assert streams > 0 and kopfsession.REQUEST_CONNECTIONS > 0


def test_refused_credentials_end_in_kopfs_login_error_instead_of_a_loop(
    credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fresh-user trial 51 Y1: with a token the API server refuses, kopf invalidates the credentials
    and logs in again; the login handler handed it a new session each time, which kopf's guard
    against the same refused credentials (``Vault._update_converted``: not ``in`` the invalidated
    ones) never matched, so the operator re-authenticated forever. The same credentials now give the
    same session: kopf drops it and ends with ``LoginError``, as with its own ``ConnectionInfo``."""
    from kopf._cogs.structs.credentials import LoginError, Vault, VaultKey  # noqa: PLC0415

    monkeypatch.setattr(kopfsession, "_sessions", [])
    kopf_settings = configured_settings()
    key = VaultKey("login")

    async def scenario() -> tuple[bool, bool]:
        vault = Vault()
        first = await startup.login(settings=kopf_settings)
        await vault.populate({key: first})
        handed: list[kopf.AiohttpSession] = []

        async def log_in_again() -> None:  # kopf's re-authentication activity
            await vault.wait_for_emptiness()
            handed.append(await startup.login(settings=kopf_settings))
            await vault.populate({key: handed[0]})

        again = asyncio.create_task(log_in_again())
        try:
            await vault.invalidate(key, first, exc=RuntimeError("401 Unauthorized"))
            refused = False
        except LoginError:
            refused = True
        await again
        other = kopfsession.session_for(kopf.ConnectionInfo(server="https://elsewhere:6443"), 5)
        fresh = other is not first
        for session in {id(s): s for s in (first, *handed, other)}.values():
            await session.aiohttp_session.close()
        return refused, fresh

    refused, fresh = asyncio.run(scenario())
    assert refused, "the same refused credentials must end in kopf's LoginError, not another session"
    assert fresh, "other credentials (a rotated token) get a session of their own"

    async def started_again() -> bool:  # a new event loop: an operator run again in this process
        session = await startup.login(settings=kopf_settings)
        usable = not session.aiohttp_session.closed
        await session.aiohttp_session.close()
        return usable

    # the in-process integration tests run the operator several times: a session of an ended loop
    # (closed by then) must not be handed to the next run
    assert asyncio.run(started_again()), "a new event loop must get a new, open session"


def test_limited_session_refuses_no_limit() -> None:
    info = kopf.ConnectionInfo(server="https://localhost:6443")
    for limit in (0, -1):
        with pytest.raises(ValueError, match="at least 1"):
            kopfsession.limited_session(info, limit)


# -- the watch streams: kopf's own observers and orchestrator on a simulated cluster --------------

CLUSTER_SCOPED = frozenset({"nodes", "customresourcedefinitions", "apiservices", "namespaces"})
VERBS = frozenset({"get", "list", "watch", "patch", "create", "update", "delete"})


def _cluster(registry: kopf.OperatorRegistry, *, all_namespaced: bool) -> list[references.Resource]:
    """The resources a cluster serves for ``registry``'s watched selectors, kopf's own (namespaces,
    CRDs) and both peering CRDs of each scope; cluster-scoped as in Kubernetes unless ``all_namespaced``."""
    selectors = kopfsession.watched_selectors(registry)
    served = [(s.group or "", s.version or "v1", str(s.any_name or s.plural)) for s in selectors]
    served += [("", "v1", "namespaces"), ("apiextensions.k8s.io", "v1", "customresourcedefinitions")]
    for group in ("kopf.dev", "zalando.org"):
        served += [(group, "v1", "clusterkopfpeerings"), (group, "v1", "kopfpeerings")]
    return [
        references.Resource(
            group,
            version,
            plural,
            namespaced=all_namespaced or not (plural in CLUSTER_SCOPED or plural.startswith("cluster")),
            verbs=VERBS,
        )
        for group, version, plural in sorted(set(served))
    ]


def _opened_watches(
    monkeypatch: pytest.MonkeyPatch,
    registry: kopf.OperatorRegistry,
    settings: kopf.OperatorSettings,
    namespaces: tuple[str, ...],
    cluster: list[references.Resource],
) -> list[tuple[str, str | None]]:
    """Every watch stream kopf 1.45.2 starts for ``registry`` on ``cluster`` — its resource and
    namespace observers (``kopf/_core/reactor/running.py`` ``spawn_tasks``) and one round of its
    orchestrator (``orchestration.adjust_tasks``) — with ``queueing.watcher``, through which every
    stream goes, recording instead of connecting."""
    opened: list[tuple[str, str | None]] = []

    async def watcher(*, resource: references.Resource, namespace: str | None, **_: Any) -> None:
        opened.append((repr(resource), namespace))
        await asyncio.Event().wait()

    async def scan(**_: Any) -> list[references.Resource]:
        return cluster

    async def listing(**_: Any) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        yield [{"metadata": {"name": ns}} for ns in namespaces], "1"

    async def keepalive(**_: Any) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(queueing, "watcher", watcher)
    monkeypatch.setattr(scanning, "scan_resources", scan)
    monkeypatch.setattr(fetching, "fetch_objs", listing)
    monkeypatch.setattr(peering, "keepalive", keepalive)
    settings.peering.clusterwide = not namespaces  # as kopf.run(clusterwide=...) sets it

    async def run() -> None:
        insights = references.Insights()
        observers = [
            asyncio.create_task(
                observation.resource_observer(settings=settings, registry=registry, insights=insights)
            ),
            asyncio.create_task(
                observation.namespace_observer(
                    clusterwide=not namespaces, namespaces=namespaces, insights=insights, settings=settings
                )
            ),
        ]
        await asyncio.wait_for(
            asyncio.gather(insights.ready_resources.wait(), insights.ready_namespaces.wait()), 5
        )
        operator_paused = aiotoggles.ToggleSet(any)
        ensemble = orchestration.Ensemble(
            operator_indexed=aiotoggles.ToggleSet(all),
            operator_paused=operator_paused,
            peering_missing=await operator_paused.make_toggle(name="peering CRD is missing"),
        )
        await orchestration.adjust_tasks(
            processor=functools.partial(lambda **_: None),
            insights=insights,
            settings=settings,
            identity=peering.Identity("test"),
            ensemble=ensemble,
        )
        for _ in range(10):
            await asyncio.sleep(0)
        tasks = [*observers, *ensemble.get_tasks(ensemble.get_keys())]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())
    return opened


@pytest.mark.parametrize("namespaces", [(), ("ml",), NAMESPACES], ids=["cluster-wide", "one", "two"])
@pytest.mark.parametrize("standalone", [True, False], ids=["standalone", "peering"])
@pytest.mark.parametrize("scanning", [None, True, False], ids=["as-configured", "scanning", "no-scanning"])
@pytest.mark.parametrize("all_namespaced", [False, True], ids=["real-scopes", "all-namespaced"])
def test_the_derived_watch_streams_bound_what_kopf_opens(
    monkeypatch: pytest.MonkeyPatch,
    namespaces: tuple[str, ...],
    standalone: bool,
    scanning: bool | None,
    all_namespaced: bool,
) -> None:
    """This operator's registry and settings (``configure_kopf``: scanning only cluster-wide), or
    scanning forced on or off: kopf opens no more watch streams than :func:`watch_streams`, and
    exactly as many when every resource is namespaced (the bound counts each once per namespace)."""
    monkeypatch.setattr(operator_settings, "_current", Settings.model_validate({"namespaces": namespaces}))
    settings = configured_settings()
    settings.peering.standalone = standalone
    if scanning is not None:
        settings.scanning.disabled = not scanning
    registry = kopf.get_default_registry()
    bound = kopfsession.watch_streams(registry, settings, namespaces)
    cluster = _cluster(registry, all_namespaced=all_namespaced)
    opened = _opened_watches(monkeypatch, registry, settings, namespaces, cluster)
    assert len(opened) <= bound, sorted(opened, key=str)
    if all_namespaced:
        assert len(opened) == bound, sorted(opened, key=str)
    peerings = {repr(r) for r in cluster if r.plural.endswith("kopfpeerings")}
    assert len({r for r, _ in opened} & peerings) == (0 if standalone else 2), "kopf.dev and zalando.org"


def test_a_new_watched_resource_raises_the_count() -> None:
    """Counted from the registry: every kind of watching handler on a new resource adds one stream
    per namespace; handlers on a resource already watched add none; a selector that is not
    specific (here by category) cannot be counted and is refused."""
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.scanning.disabled = True
    registry = kopf.OperatorRegistry()
    counts = [kopfsession.watch_streams(registry, settings, NAMESPACES)]

    def handler(**_: Any) -> None:
        return None

    kopf.on.event("example.com", "v1", "widgets", registry=registry)(handler)
    counts.append(kopfsession.watch_streams(registry, settings, NAMESPACES))
    kopf.index("example.com", "v1", "widgets", registry=registry)(handler)
    counts.append(kopfsession.watch_streams(registry, settings, NAMESPACES))
    kopf.index("", "v1", "secrets", registry=registry)(handler)
    kopf.timer("example.com", "v1", "gadgets", interval=60, registry=registry)(handler)
    kopf.on.create("example.com", "v1", "gizmos", registry=registry)(handler)
    counts.append(kopfsession.watch_streams(registry, settings, NAMESPACES))
    assert counts == [0, 2, 2, 8]
    assert kopfsession.watch_streams(registry, settings, ()) == 4  # cluster-wide: one each

    kopf.on.event(category="all", registry=registry)(handler)
    with pytest.raises(ValueError, match="unspecific"):
        kopfsession.watch_streams(registry, settings, NAMESPACES)
