"""HTTPS for the operator's /metrics (trtllm_operator.kube.metrics_tls), the behaviour of
controller-runtime's secure metrics server (pkg/metrics/server/server.go, commit 86a0d40): tls.crt and
tls.key from a directory, reloaded when they change, else a self-signed certificate for localhost and
127.0.0.1. Certificates the tests hand over are made by the openssl command line, not by the code
under test; the client is Python's ssl with verification on."""

from __future__ import annotations

import datetime
import http.client
import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry, Counter
from support.metrics_auth import get_metrics
from support.wait import wait_for

from trtllm_operator.kube.metrics_auth import serve_metrics
from trtllm_operator.kube.metrics_tls import ServingCertificate


def openssl_cert(directory: Path, cn: str) -> bytes:
    """A self-signed tls.crt/tls.key for ``localhost`` made by the openssl CLI; returns its DER."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN={cn}", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", str(directory / "tls.key"), "-out", str(directory / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return ssl.PEM_cert_to_DER_cert((directory / "tls.crt").read_text())


def served_cert(port: int, context: ssl.SSLContext) -> bytes:
    """The DER certificate the server presents to ``context`` (which must accept it)."""
    conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        conn.connect()
        assert isinstance(conn.sock, ssl.SSLSocket)
        der = conn.sock.getpeercert(binary_form=True)
        conn.request("GET", "/metrics")
        assert conn.getresponse().status == 200
        assert der is not None
        return der
    finally:
        conn.close()


def trusting(cert_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert_file))


@pytest.fixture
def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter("probe_total", "a sample", registry=reg).inc()
    return reg


@pytest.fixture
def server_on(registry: CollectorRegistry) -> Iterator[object]:
    started: list[object] = []

    def start(tls: ServingCertificate | None) -> int:
        server = serve_metrics(0, "127.0.0.1", registry, None, tls)
        started.append(server)
        return int(server.server_address[1])

    yield start
    for server in started:
        server.shutdown()  # type: ignore[attr-defined]


def test_the_certificate_directory_is_served_verified_and_reloaded(server_on: object, tmp_path: Path) -> None:
    first = openssl_cert(tmp_path / "a", "first")
    certs = tmp_path / "certs"
    certs.mkdir()
    for name in ("tls.crt", "tls.key"):
        (certs / name).write_bytes((tmp_path / "a" / name).read_bytes())
    tls = ServingCertificate(str(certs))
    assert tls.source == str(certs)
    port = server_on(tls)  # type: ignore[operator]
    assert served_cert(port, trusting(tmp_path / "a" / "tls.crt")) == first
    status, body = get_metrics(port, context=trusting(tmp_path / "a" / "tls.crt"))
    assert status == 200 and "probe_total 1.0" in body

    # Rotation (cert-manager renewing the Secret): the next connection gets the new certificate.
    second = openssl_cert(tmp_path / "b", "second")
    for name in ("tls.key", "tls.crt"):
        (certs / name).write_bytes((tmp_path / "b" / name).read_bytes())
        stamp = os.stat(certs / name).st_mtime + 5  # a changed mtime even on a coarse clock
        os.utime(certs / name, (stamp, stamp))
    wait_for(
        lambda: served_cert(port, trusting(tmp_path / "b" / "tls.crt")) == second,
        timeout=10,
        desc="the renewed certificate served",
    )  # fails (AssertionError) unless it is: its result needs no assert
    with pytest.raises(ssl.SSLCertVerificationError):
        served_cert(port, trusting(tmp_path / "a" / "tls.crt"))


def test_without_files_a_self_signed_certificate_for_localhost(server_on: object, tmp_path: Path) -> None:
    tls = ServingCertificate(str(tmp_path / "absent"))
    assert tls.source.startswith("self-signed")
    port = server_on(tls)  # type: ignore[operator]
    # Nothing to verify against: a verifying client refuses it, the ServiceMonitor's skip reads it.
    with pytest.raises(ssl.SSLCertVerificationError):
        served_cert(port, ssl.create_default_context())
    status, body = get_metrics(port)
    assert status == 200 and "probe_total 1.0" in body
    unverified = ssl.create_default_context()
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
    cert = x509.load_der_x509_certificate(served_cert(port, unverified))
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    now = datetime.datetime.now(datetime.UTC)
    assert cert.not_valid_before_utc <= now < cert.not_valid_after_utc
    assert cert.not_valid_after_utc - now > datetime.timedelta(days=364)


def test_plain_http_gets_no_metrics_from_the_https_port(server_on: object) -> None:
    port = server_on(ServingCertificate(None))  # type: ignore[operator]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            conn.request("GET", "/metrics")
            conn.getresponse()
    finally:
        conn.close()
    assert get_metrics(port)[0] == 200  # the server still serves after the failed handshake


def test_files_that_do_not_load_fail_the_start_naming_the_directory(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate")
    (tmp_path / "tls.key").write_text("not a key")
    with pytest.raises(ValueError, match=f"cannot load tls.crt/tls.key from {tmp_path}.*METRICS_CERT_DIR"):
        ServingCertificate(str(tmp_path))
