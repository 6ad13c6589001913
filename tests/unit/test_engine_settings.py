"""Operator settings: environment variables, flags, defaults, error messages naming the variable."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from trtllm_operator.cli import main
from trtllm_operator.commands.run import register, settings_from_args
from trtllm_operator.settings import (
    ENV_PREFIX,
    TOOLING_VARIABLES,
    Settings,
    SettingsError,
    chart_settings_file,
    env_names,
    settings_table,
)

REPO = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["run", *argv])


def test_defaults_watch_the_whole_cluster() -> None:
    s = Settings.from_env({})
    assert s.clusterwide and s.max_concurrent_builds == 2 and s.liveness_port == 8081


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({"NAMESPACES": "a, b,,c"}, "namespaces", ("a", "b", "c")),
        ({"MAX_CONCURRENT_BUILDS": "5"}, "max_concurrent_builds", 5),
        ({"STANDALONE": "false"}, "standalone", False),
        ({"LIVENESS_PORT": ""}, "liveness_port", None),
        ({"GPU_CATALOG_CONFIGMAP": "gpus"}, "gpu_catalog_configmap", "gpus"),
        ({"LOG_FORMAT": "json"}, "log_format", "json"),
    ],
)
def test_environment_variables(env: dict[str, str], field: str, value: object) -> None:
    s = Settings.from_env({ENV_PREFIX + k: v for k, v in env.items()})
    assert getattr(s, field) == value


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"MAX_CONCURRENT_BUILDS": "0"}, "TRTLLM_OPERATOR_MAX_CONCURRENT_BUILDS"),
        ({"LOG_FORMAT": "xml"}, "TRTLLM_OPERATOR_LOG_FORMAT"),
        ({"RESYNC_SECONDS": "soon"}, "TRTLLM_OPERATOR_RESYNC_SECONDS"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], needle: str) -> None:
    with pytest.raises(SettingsError, match=needle):
        Settings.from_env({ENV_PREFIX + k: v for k, v in env.items()})


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("MAX_CONCURENT_BUILDS", "did you mean TRTLLM_OPERATOR_MAX_CONCURRENT_BUILDS?"),
        ("NAMESPACE", "did you mean TRTLLM_OPERATOR_NAMESPACES?"),
        ("BOGUS", "docs/operator.md lists the settings"),
    ],
)
def test_an_unknown_variable_is_refused_naming_the_nearest_setting(name: str, hint: str) -> None:
    """A fresh-user trial's misspelled TRTLLM_OPERATOR_* variable was ignored: the default stayed in
    force without a word."""
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({ENV_PREFIX + name: "1", ENV_PREFIX + "LOG_FORMAT": "json"})
    assert f"{ENV_PREFIX}{name} is not an operator setting ({hint})" in str(caught.value)


def test_development_tooling_variables_are_not_refused() -> None:
    """hack/ reads these; a developer's shell may carry them into an operator started from it."""
    assert Settings.from_env(dict.fromkeys(TOOLING_VARIABLES, "/tmp/x")) == Settings.from_env({})
    assert not set(TOOLING_VARIABLES) & set(env_names())


#: The test harnesses and tooling that start operators or read their variables.
_HARNESS = [
    "tests/support",
    "tests/integration",
    "tests/e2e",
    "tests/fidelity",
    "hack",
    "benchmarks",
    "Makefile",
]


def test_harnesses_set_only_known_variables() -> None:
    """Every TRTLLM_OPERATOR_* name the harnesses, hack/ and benchmarks/ write is a setting or a
    tooling variable, so the operator they start is not refused for it."""
    found: set[str] = set()
    for top in _HARNESS:
        root = REPO / top
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".sh", ".yaml", ".md", ".mk"):
                found |= set(
                    re.findall(r"TRTLLM_OPERATOR_[A-Z0-9_]*[A-Z0-9]", path.read_text(errors="ignore"))
                )
    assert found, "the scan found nothing: the harness paths moved"
    assert not found - set(env_names()) - set(TOOLING_VARIABLES)


def test_chart_settings_file_is_current() -> None:
    shipped = (REPO / "charts/trtllm-operator/files/operator-settings.json").read_text()
    assert shipped == chart_settings_file(), (
        "charts/trtllm-operator/files/operator-settings.json is stale: write "
        "trtllm_operator.settings.chart_settings_file() to it"
    )


def test_flags_override_the_environment() -> None:
    base = Settings.from_env({ENV_PREFIX + "NAMESPACES": "x", ENV_PREFIX + "MAX_CONCURRENT_BUILDS": "3"})
    s = settings_from_args(
        parse("-n", "a", "-n", "b", "--max-concurrent-builds", "7", "--liveness-port", "0"), base
    )
    assert (s.namespaces, s.max_concurrent_builds, s.liveness_port) == (("a", "b"), 7, None)
    assert settings_from_args(parse("--all-namespaces"), base).clusterwide
    assert settings_from_args(parse(), base).namespaces == ("x",)
    with pytest.raises(SettingsError, match="--max-concurrent-builds"):
        settings_from_args(parse("--max-concurrent-builds", "0"), base)


def test_settings_table_lists_every_field() -> None:
    table = settings_table()
    for name in Settings.model_fields:
        assert f"`{ENV_PREFIX}{name.upper()}`" in table


def test_docs_show_the_current_settings_table() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "operator.md").read_text()
    assert settings_table() in docs, (
        "docs/operator.md is stale: paste trtllm_operator.settings.settings_table()"
    )


#: "operator setting X" (or "settings X and Y") as the operator's messages, docstrings and docs name a
#: setting: X in camelCase, the field of :class:`Settings` in snake_case.
_NAMED_SETTING = re.compile(r"operator setting `?([a-z][A-Za-z0-9]+)|operator settings `([a-z][A-Za-z0-9]+)")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_setting_a_message_or_doc_names_exists() -> None:
    """A fresh-user report: messages sent users to an operator setting ``gpuCatalog`` that no
    configuration has (the settings are gpu_catalog_configmap / gpu_catalog_file). Every "operator
    setting X" in the operator's and the builder's code and in docs/ must be a field of Settings."""
    sources = [
        *sorted((REPO / "operator" / "src").rglob("*.py")),
        *sorted((REPO / "engine-builder" / "src").rglob("*.py")),
        *sorted((REPO / "docs").glob("*.md")),
    ]
    named: dict[str, set[str]] = {}
    for path in sources:
        for match in _NAMED_SETTING.finditer(path.read_text(encoding="utf-8")):
            named.setdefault(match.group(1) or match.group(2), set()).add(str(path.relative_to(REPO)))
    assert "gpuCatalogConfigmap" in named  # the catalog's fix names the real setting (planner/catalog.py)
    unknown = {n: sorted(where) for n, where in named.items() if _snake(n) not in Settings.model_fields}
    assert not unknown, f"settings named that do not exist: {unknown}"


def test_run_says_a_bad_setting_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 50 X11: ``run --max-concurrent-builds 0`` printed its one-line error on stdout
    (rc 2), unlike run's other refusals ("trtllm-operator run: error: …" on stderr)."""
    monkeypatch.delenv(ENV_PREFIX + "MAX_CONCURRENT_BUILDS", raising=False)
    assert main(["run", "-n", "x", "--max-concurrent-builds", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("trtllm-operator run: error: ") and "--max-concurrent-builds" in err, err
    assert err.count("\n") == 1, err


def test_run_refuses_a_busy_or_invalid_port_in_one_line_before_kopf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 50 X6: ``run`` with the metrics or liveness port in use, or out of range
    (99999), ended with a 28–65-line traceback, rc 1. Now one line naming the flag, the port and the
    reason, rc 2, before the kubeconfig, the API server and kopf."""
    import socket  # noqa: PLC0415

    from trtllm_operator.commands import run  # noqa: PLC0415

    def kopf_started(*_: object, **__: object) -> None:
        raise AssertionError("run_operator was called")

    monkeypatch.setattr(run, "run_operator", kopf_started)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))  # reached only if the ports pass
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for key in ("METRICS_PORT", "LIVENESS_PORT", "LISTEN_ADDRESS"):
        monkeypatch.delenv(ENV_PREFIX + key, raising=False)
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        for flag, other in (("--metrics-port", "--liveness-port"), ("--liveness-port", "--metrics-port")):
            assert main(["run", "-n", "x", flag, str(busy), other, "0"]) == 2
            out, err = capsys.readouterr()
            assert out == "" and err.count("\n") == 1, err
            assert err.startswith(
                f"trtllm-operator run: error: {flag} {busy}: cannot listen on 0.0.0.0:{busy}"
            )
            assert "address already in use" in err and "or 0 to disable it" in err, err
        # the environment's port is named by its variable
        monkeypatch.setenv(ENV_PREFIX + "METRICS_PORT", str(busy))
        assert main(["run", "-n", "x", "--liveness-port", "0"]) == 2
        assert f"error: {ENV_PREFIX}METRICS_PORT {busy}: cannot listen" in capsys.readouterr().err
        monkeypatch.delenv(ENV_PREFIX + "METRICS_PORT")
    for port in ("99999", "-1"):
        assert main(["run", "-n", "x", "--metrics-port", port]) == 2
        err = capsys.readouterr().err
        said = f"--metrics-port {port}: out of range 0–65535; pass a port, or 0 to disable it"
        assert err == f"trtllm-operator run: error: {said}\n"
    assert main(["run", "-n", "x", "--metrics-port", "18181", "--liveness-port", "18181"]) == 2
    assert "--liveness-port 18181: --metrics-port has the same port" in capsys.readouterr().err
    # free ports pass: the next refusal is the missing kubeconfig's
    assert main(["run", "-n", "x", "--metrics-port", "0", "--liveness-port", "0"]) == 2
    assert "cannot load kubeconfig" in capsys.readouterr().err
