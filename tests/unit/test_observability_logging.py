"""Structured logs: JSON and text formatters keyed by namespace/name, token redaction."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_builder.progress import Progress
from engine_builder.redaction import REDACTED, redact, redact_data
from engine_builder.report import build_report
from trtllm_operator.logging import (
    JsonFormatter,
    TextFormatter,
    configure_logging,
    object_context,
    redact_kopf_events,
)

# Made-up values in the shapes of real credentials (none is valid anywhere).
HF_TOKEN = "hf_" + "aBcD3fGh1jKlMn0pQrStUvWxYz0123456789"
AWS_KEY_ID = "AKIA" + "Q3EXAMPLE7ZZ4XYZ2AB"[:16]
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
NVAPI_KEY = "nvapi-" + "Xy3kQ9vLmN0pR7sT2uVwZ5aB8cD1eF4gH6iJ-kLmNoPq"
#: A credential with no recognisable shape: only its context (env name, key) gives it away.
HF_PLAIN = "plainvalue42"
JWT = (
    "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLXBhcnQtaGVyZQ"
)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"download failed with token {HF_TOKEN}", HF_TOKEN),
        (f"HF_TOKEN={HF_TOKEN}", HF_TOKEN),
        (f"using key {AWS_KEY_ID} for s3://bucket", AWS_KEY_ID),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
        (f'{{"aws_secret_access_key": "{AWS_SECRET}"}}', AWS_SECRET),
        (f"secretAccessKey: {AWS_SECRET}", AWS_SECRET),
        ("Authorization: Bearer abc.DEF-123_xyz~ghi", "abc.DEF-123_xyz~ghi"),
        (f"header authorization=bearer {JWT}", JWT),
        (f"token file had {JWT}", JWT),
        ("login with password=hunter22 failed", "hunter22"),
        ('{"token": "s3cr3t-value-1"}', "s3cr3t-value-1"),
        # NVIDIA API keys (build.nvidia.com / NGC personal keys start with nvapi-).
        (f"NGC_API_KEY is {NVAPI_KEY}", NVAPI_KEY),
        # JSON-escaped inside another JSON string (a report embedded in a log line).
        ('{"message": "{\\"token\\": \\"s3cr3t-value-2\\"}"}', "s3cr3t-value-2"),
        # URL-encoded query values and headers.
        ("GET /resolve/main/config.json?token%3Ds3cr3t-value-3&x=1", "s3cr3t-value-3"),
        ("Authorization=Bearer%20abcDEF123ghiJKL", "abcDEF123ghiJKL"),
        # An environment variable rendered as JSON or YAML (a pod spec echoed in an error).
        (f'{{"name": "HF_TOKEN", "value": "{HF_PLAIN}"}}', HF_PLAIN),
        (f"- name: MY_SERVICE_PASSWORD\n  value: {HF_PLAIN}", HF_PLAIN),
        # Credentials in a URL.
        ("fetch https://alice:pa55w0rd-xyz@minio.local:9000/bucket failed", "pa55w0rd-xyz"),
        # A bare AWS secret access key (AWS IAM User Guide's example shape).
        (f"credentials {AWS_SECRET} rejected", AWS_SECRET),
    ],
)
def test_redact_removes_the_secret(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "max_num_tokens=8192 maxBatchSize=64",
        "KV cache 131072 tokens (256 sequences of 512 tokens) on H100-SXM-80GB",
        "builder Job build-0a1b2c3d4e5f6a7b-123abc created",
        "engine key 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "credentialsSecretRef names Secret hf-token (value not read)",
        "HPA scaling 2 → 3: AboveTarget: queue depth 5.0 > 2.0",
        # Not credentials: a git commit (40 lower-case hex), a manifest digest, a URL without
        # a password, a path, an ordinary env var.
        "built from commit 0123456789abcdef0123456789abcdef01234567",
        "manifestDigest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "fetch https://huggingface.co:443/meta-llama/Llama-3.1-8B/resolve/main/config.json",
        "artifact at /var/lib/trtllm/engines/llama-8b/rank0.engine",
        '{"name": "TRTLLM_ENGINE_DIR", "value": "/engines/llama"}',
    ],
)
def test_redact_keeps_ordinary_lines(text: str) -> None:
    assert redact(text) == text


def test_redact_data_redacts_every_string_and_keeps_keys() -> None:
    status = {
        "phase": "Failed",
        "conditions": [{"type": "Ready", "message": f"fetch failed: token={HF_TOKEN}"}],
        "build": {"lastLogLines": [f"using {AWS_KEY_ID}", "ok"], "attempts": 2},
    }
    out = redact_data(status)
    assert HF_TOKEN not in str(out) and AWS_KEY_ID not in str(out)
    assert out["conditions"][0]["message"].startswith("fetch failed: token=")
    assert out["build"]["lastLogLines"][1] == "ok" and out["build"]["attempts"] == 2
    assert status["conditions"][0]["message"].endswith(HF_TOKEN)  # the input is not modified


def test_builder_report_and_progress_are_redacted(tmp_path: Path) -> None:
    """The builder's termination message (Kubernetes copies it into the pod status) and progress
    lines go through the same redactor as the operator's writes."""
    report = build_report(status="Failed", reason="FetchFailed", message=f"401 for token {HF_TOKEN}")
    assert HF_TOKEN not in json.dumps(report) and REDACTED in report["message"]
    stream = io.StringIO()
    progress = Progress(tmp_path / "progress.json", ("fetch",), stream=stream)
    progress.start("fetch", f"downloading with Authorization: Bearer {HF_PLAIN}xyz")
    assert HF_PLAIN not in stream.getvalue()
    assert HF_PLAIN not in (tmp_path / "progress.json").read_text()


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("trtllm_operator.handlers.engine", logging.INFO, __file__, 1, msg, args, None)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_json_line_carries_kopf_object_reference() -> None:
    ref = {
        "apiVersion": "llm.trtllm-operator.dev/v1alpha1",
        "kind": "LLMEngine",
        "name": "llama",
        "uid": "u-1",
    }
    record = _record("Handler %r succeeded", "engine_changed", k8s_ref={**ref, "namespace": "team-a"})
    line = json.loads(JsonFormatter().format(record))
    assert line["namespace"] == "team-a"
    assert line["name"] == "llama"
    assert line["kind"] == "LLMEngine"
    assert line["uid"] == "u-1"
    assert line["message"] == "Handler 'engine_changed' succeeded"
    assert line["level"] == "INFO"
    assert line["logger"] == "trtllm_operator.handlers.engine"
    assert line["time"].endswith("Z")
    assert "k8s_ref" not in line


def test_json_line_keyed_by_object_context() -> None:
    with object_context("LLMDeployment", "team-b", "chat"):
        inside = json.loads(JsonFormatter().format(_record("rolled out")))
    outside = json.loads(JsonFormatter().format(_record("starting")))
    assert (inside["kind"], inside["namespace"], inside["name"]) == ("LLMDeployment", "team-b", "chat")
    assert "namespace" not in outside and "name" not in outside


def test_json_redacts_message_extras_and_exceptions() -> None:
    try:
        raise RuntimeError(f"401 from the Hub with {HF_TOKEN}")
    except RuntimeError:
        record = _record("fetch failed: %s", f"Bearer {HF_TOKEN}", detail=f"key {AWS_KEY_ID}")
        record.exc_info = __import__("sys").exc_info()
    text = JsonFormatter().format(record)
    line = json.loads(text)
    assert HF_TOKEN not in text and AWS_KEY_ID not in text
    assert "RuntimeError" in line["exception"]
    assert line["detail"] == f"key {REDACTED}"


def test_text_line_prefix_and_redaction() -> None:
    with object_context("LLMEngine", "team-a", "llama"):
        text = TextFormatter().format(_record("token %s leaked", HF_TOKEN))
    assert "[team-a/llama] token" in text
    assert "[INFO    ]" in text
    assert HF_TOKEN not in text


@pytest.fixture
def root_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


@pytest.mark.usefixtures("root_logging")
def test_configure_logging_json_end_to_end() -> None:
    out = io.StringIO()
    configure_logging("json", "INFO", stream=out)
    configure_logging("json", "INFO", stream=out)  # idempotent: one handler, one line per record
    with object_context("LLMEngine", "ns", "e"):
        logging.getLogger("trtllm_operator.test").info("hello %s", HF_TOKEN)
    logging.getLogger("trtllm_operator.test").debug("not at INFO")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(x["namespace"], x["name"], x["message"]) for x in lines] == [("ns", "e", f"hello {REDACTED}")]
    # kopf's Event poster stays attached to kopf.objects (configure_logging leaves it alone)
    kopf_objects = logging.getLogger("kopf.objects")
    import kopf  # noqa: F401, PLC0415 - importing kopf attaches the poster

    assert any(type(h).__name__ == "K8sPoster" for h in kopf_objects.handlers)


def test_configure_logging_rejects_unknown_format() -> None:
    with pytest.raises(ValueError, match="log_format"):
        configure_logging("yaml")


def test_kopf_event_poster_gets_redacted_messages() -> None:
    import kopf  # noqa: F401, PLC0415 - importing kopf attaches the poster to kopf.objects

    assert redact_kopf_events() == 1
    (poster,) = [h for h in logging.getLogger("kopf.objects").handlers if type(h).__name__ == "K8sPoster"]
    assert poster.format(_record("Handler failed: 401 for %s", f"Bearer {HF_TOKEN}")) == (
        f"Handler failed: 401 for Bearer {REDACTED}"
    )


@pytest.mark.usefixtures("root_logging")
@pytest.mark.parametrize(
    ("level", "logger", "record_level", "message", "shown_as"),
    [
        # kopf's per-tick timer success: DEBUG, so hidden at INFO ...
        ("INFO", "kopf.objects", logging.INFO, "Timer 'engine_build_progress' succeeded.", None),
        # ... and shown, as DEBUG, at DEBUG
        ("DEBUG", "kopf.objects", logging.INFO, "Timer 'engine_build_progress' succeeded.", "DEBUG"),
        # failures and retries of the same timer keep their level
        (
            "INFO",
            "kopf.objects",
            logging.ERROR,
            "Timer 'engine_build_progress' failed with an exception. Will retry.",
            "ERROR",
        ),
        ("INFO", "kopf.objects", logging.WARNING, "Timer 'engine_resync' failed temporarily: x", "WARNING"),
        # a create/update handler's success (once per change) stays INFO
        ("INFO", "kopf.objects", logging.INFO, "Handler 'on_engine' succeeded.", "INFO"),
        # the operator's own line that happens to look alike is not kopf's
        ("INFO", "trtllm_operator.x", logging.INFO, "Timer 'a' succeeded.", "INFO"),
        # a library logger with its own DEBUG level does not leak DEBUG lines at INFO
        ("INFO", "urllib3.connectionpool", logging.DEBUG, "Starting new HTTPS connection", None),
        ("INFO", "kopf._core.reactor", logging.DEBUG, "Adding the finalizer", None),
        ("WARNING", "kopf.objects", logging.INFO, "Handler 'on_engine' succeeded.", None),
    ],
)
def test_log_level_and_timer_success_filter(
    level: str, logger: str, record_level: int, message: str, shown_as: str | None
) -> None:
    out = io.StringIO()
    configure_logging("json", level, stream=out)
    log = logging.getLogger(logger)
    saved = log.level
    log.setLevel(logging.DEBUG)  # as a library may do: the handler must still enforce the level
    try:
        log.log(record_level, message)
    finally:
        log.setLevel(saved)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(x["level"], x["message"]) for x in lines] == ([(shown_as, message)] if shown_as else [])
