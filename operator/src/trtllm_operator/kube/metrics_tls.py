"""TLS for the operator's ``/metrics`` endpoint, as controller-runtime's secure metrics server.

controller-runtime (kubernetes-sigs/controller-runtime ``pkg/metrics/server/server.go``, commit
86a0d40, ``Options.SecureServing``, ``CertDir``/``CertName``/``KeyName`` and ``createListener``)
serves metrics over HTTPS with ``tls.crt`` and ``tls.key`` from a certificate directory, reloaded
when they change (its ``certwatcher``), and falls back to a self-signed certificate for
``localhost`` / ``127.0.0.1`` (client-go ``util/cert.GenerateSelfSignedCertKeyWithFixtures``) when
the files are not there: "It's just important that we encrypt the communication". A scraper of the
self-signed endpoint has nothing to verify against, so it skips verification (kubebuilder's
``config/prometheus/monitor.yaml``: ``scheme: https``, ``tlsConfig.insecureSkipVerify: true``) and
relies on the bearer token check (:mod:`trtllm_operator.kube.metrics_auth`) for who may read.

Differences, on purpose: the fallback is one self-signed certificate (client-go makes a CA and a
leaf signed by it; nothing verifies either), made in memory at start and never written where
another process could read the key.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)

#: File names in the certificate directory (controller-runtime's defaults for CertName/KeyName).
CERT_NAME = "tls.crt"
KEY_NAME = "tls.key"
#: The self-signed certificate's host, IP and lifetime (client-go GenerateSelfSignedCertKeyWithFixtures
#: called with "localhost" and 127.0.0.1 by controller-runtime; maxAge 1 year; RSA 2048).
SELF_SIGNED_HOST = "localhost"
SELF_SIGNED_IP = "127.0.0.1"
SELF_SIGNED_DAYS = 365
RSA_BITS = 2048


def self_signed_pem(now: datetime.datetime | None = None) -> tuple[bytes, bytes]:
    """``(certificate PEM, private key PEM)``: a self-signed serving certificate for
    :data:`SELF_SIGNED_HOST` (DNS SAN) and :data:`SELF_SIGNED_IP` (IP SAN), key usage serverAuth,
    valid from ``now`` (UTC; default the current time) for :data:`SELF_SIGNED_DAYS` days."""
    start = now or datetime.datetime.now(datetime.UTC)
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"{SELF_SIGNED_HOST}@{int(start.timestamp())}")]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - datetime.timedelta(hours=1))
        .not_valid_after(start + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(SELF_SIGNED_HOST), x509.IPAddress(ipaddress.ip_address(SELF_SIGNED_IP))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


class ServingCertificate:
    """The server-side TLS context of ``/metrics``: from ``cert_dir``'s ``tls.crt``/``tls.key`` when
    both exist (reloaded, on the next connection, once either file's modification time changes),
    else self-signed (:func:`self_signed_pem`). TLS 1.2 or newer (Go's crypto/tls server default,
    which controller-runtime keeps).

    Raises ``ValueError`` naming the directory when its files exist but do not load (controller-runtime
    fails its start the same way, through ``certwatcher.New``)."""

    def __init__(self, cert_dir: str | None) -> None:
        self._dir = Path(cert_dir) if cert_dir else None
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        try:
            self._context = self._load()
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"metrics: cannot load {CERT_NAME}/{KEY_NAME} from {self._dir} "
                f"(TRTLLM_OPERATOR_METRICS_CERT_DIR; chart value metrics.certSecret): {exc}"
            ) from exc

    @property
    def source(self) -> str:
        """Where the certificate comes from, for the start-up log line."""
        return str(self._dir) if self._stamp is not None else "self-signed (localhost, 127.0.0.1)"

    def _files(self) -> tuple[Path, Path] | None:
        if self._dir is None:
            return None
        cert, key = self._dir / CERT_NAME, self._dir / KEY_NAME
        return (cert, key) if cert.is_file() and key.is_file() else None

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        files = self._files()
        if files is not None:
            context.load_cert_chain(files[0], files[1])
            self._stamp = (files[0].stat().st_mtime, files[1].stat().st_mtime)
            return context
        if self._dir is not None:
            log.warning(
                "metrics: %s or %s missing in %s; serving a self-signed certificate",
                CERT_NAME,
                KEY_NAME,
                self._dir,
            )
        cert_pem, key_pem = self_signed_pem()
        # ssl loads a chain from files only: a private directory, removed once loaded.
        with tempfile.TemporaryDirectory(prefix="trtllm-metrics-tls-") as tmp:
            cert_path, key_path = Path(tmp) / CERT_NAME, Path(tmp) / KEY_NAME
            cert_path.write_bytes(cert_pem)
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key_pem)
            context.load_cert_chain(cert_path, key_path)
        self._stamp = None
        return context

    def context(self) -> ssl.SSLContext:
        """The current context; reloads the files first when they changed (a failed reload keeps the
        previous certificate and logs why, as controller-runtime's certwatcher)."""
        files = self._files()
        if files is None or self._stamp is None:
            return self._context
        try:
            stamp = (files[0].stat().st_mtime, files[1].stat().st_mtime)
        except OSError:
            return self._context
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    try:
                        self._context = self._load()
                        log.info("metrics: reloaded the serving certificate from %s", self._dir)
                    except (OSError, ssl.SSLError) as exc:
                        self._stamp = stamp  # not again until the files change once more
                        log.error("metrics: keeping the previous certificate, reloading failed: %s", exc)
        return self._context
