"""One redactor for every line the operator and the builder write where others can read it.

The operator never reads Secret values, and the builder receives them only as environment
variables, but an exception message, a third-party library or a user's misconfiguration can echo a
header, a URL or an environment variable. Everything written to a log line, an LLMEngine or
LLMDeployment ``status``, a Kubernetes Event, the builder's termination message (which Kubernetes
copies into the pod's status, readable by anyone who can get pods) or its report passes
:func:`redact` (strings) or :func:`redact_data` (JSON-like data). The operator's log formatters,
its status and Event writers, and the builder's report and traceback printing all call this one
module; it imports nothing but ``re`` so both sides (the builder runs inside the TensorRT-LLM image,
without the operator) can use it.

Forms covered (each has a test in ``tests/unit/test_observability_logging.py``):

* Hugging Face user access tokens ``hf_…`` and org tokens ``api_org_…``;
* NVIDIA API keys ``nvapi-…`` (build.nvidia.com / NGC: "keys typically start with nvapi-",
  NVIDIA NeMo Retriever docs, "Authentication and API keys");
* AWS access key ids (``AKIA``/``ASIA``/… + 16 characters) and secret access keys — both written
  as ``key=value`` / ``"key": "value"`` and bare (40 characters of the base64 alphabet, AWS IAM
  User Guide, "Managing access keys": the example ``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY``);
  a bare 40-character run is taken as a secret only when it mixes upper case, lower case and a
  digit, so hex digests and engine keys (lower-case hex) stay readable;
* ``Authorization: Bearer|Basic …`` and JWTs (service-account tokens, OIDC id tokens);
* ``password=``, ``token:``, ``api_key=``… values, also when JSON-escaped (``\\"token\\": \\"…\\"``)
  or URL-encoded (``token%3D…``, ``Bearer%20…``);
* environment variables rendered as JSON/YAML (``{"name": "HF_TOKEN", "value": "…"}``), for any
  variable whose name says token, secret, password or key;
* credentials in URLs (``scheme://user:password@host``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_WORDS = r"(?:password|passwd|api[_-]?key|access[_-]?token|auth[_-]?token|token|secret)"
#: An environment-variable name that holds a credential (HF_TOKEN, AWS_SECRET_ACCESS_KEY, …).
_SECRET_ENV_NAME = r"[A-Za-z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY)[A-Za-z0-9_]*"

#: (pattern, replacement) pairs, applied in order. Replacements keep the key so lines stay readable.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Hugging Face user/org access tokens: hf_ + 30+ alphanumerics (api_org_… for org tokens).
    (re.compile(r"\b(?:hf|api_org)_[A-Za-z0-9]{30,}\b"), REDACTED),
    # NVIDIA API keys (build.nvidia.com, NGC personal keys): nvapi- + base64url characters.
    (re.compile(r"\bnvapi-[A-Za-z0-9_-]{20,}"), REDACTED),
    # AWS access key ids (long-term AKIA, temporary ASIA, …): 4-letter prefix + 16 upper alnum.
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), REDACTED),
    # Credentials in URLs: scheme://user:password@host keeps scheme, user and host.
    (re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\"']+:)[^\s@/\"']+(@)"), r"\1" + REDACTED + r"\2"),
    # Environment variables as JSON or YAML: {"name": "HF_TOKEN", "value": "…"} / name: X value: ….
    (
        re.compile(
            r"(?i)(\\?[\"']?name\\?[\"']?\s*[:=]\s*\\?[\"']?" + _SECRET_ENV_NAME + r"\\?[\"']?\s*,?\s*"
            r"\\?[\"']?value\\?[\"']?\s*[:=]\s*\\?[\"']?)(?!\[REDACTED\])[^\s\"'\\,}]+"
        ),
        r"\1" + REDACTED,
    ),
    # AWS secret access keys and session tokens written as key=value / "key": "value".
    (
        re.compile(
            r"(?i)((?:aws_?)?(?:secret_?access_?key|session_?token)\\?[\"']?\s*[:=]\s*\\?[\"']?)"
            r"[A-Za-z0-9/+=]{16,}"
        ),
        r"\1" + REDACTED,
    ),
    # HTTP Authorization: Bearer <token> (also "Basic <base64>"), plain or URL-encoded (%20).
    (re.compile(r"(?i)\b(bearer|basic)(\s+|%20|\+)[A-Za-z0-9\-._~+/%]+=*"), r"\1\2" + REDACTED),
    # JWTs (Kubernetes service-account tokens, OIDC id tokens): three base64url parts.
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),
    # password=…, token: …, api_key=… (a whole-word key followed by = or :), also JSON-escaped
    # (\"token\": \"…\") and URL-encoded (token%3D…).
    (
        re.compile(
            r"(?i)\b(" + _SECRET_WORDS + r"\\?[\"']?\s*(?:[:=]|%3A|%3D)\s*\\?[\"']?)"
            r"(?!\[REDACTED\])[^\s\"'\\,;}&]{6,}"
        ),
        r"\1" + REDACTED,
    ),
    # Bare AWS secret access keys: 40 characters of the base64 alphabet, mixing upper case, lower
    # case and a digit (hex digests and engine keys are lower-case hex and stay readable).
    (
        re.compile(
            r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[0-9])"
            r"(?!/)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
        REDACTED,
    ),
)


def redact(text: str) -> str:
    """``text`` with every credential form of this module replaced by ``[REDACTED]``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_data(value: Any) -> Any:
    """``value`` (JSON-like: mappings, lists, strings, numbers) with every string redacted.

    Keys are kept as they are (they are field names, not data); a new object is returned, the input
    is not modified.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value
