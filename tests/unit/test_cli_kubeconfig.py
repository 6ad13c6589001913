"""commands._kubeconfig: a kubeconfig that cannot be loaded is one line naming the file, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtllm_operator.cli import main
from trtllm_operator.commands import run
from trtllm_operator.commands._kubeconfig import KubeconfigError, context_namespace, default_path, load_client


@pytest.fixture(autouse=True)
def _no_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` checks its liveness and metrics ports can be bound first (trial 50 X6); these tests are
    about the kubeconfig, so both are off (an empty variable disables each), whatever holds 8080/8081."""
    monkeypatch.setenv("TRTLLM_OPERATOR_METRICS_PORT", "")
    monkeypatch.setenv("TRTLLM_OPERATOR_LIVENESS_PORT", "")


GOOD = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "no such file"),
        ("# README\n\nkey: [unclosed\n", "cannot load kubeconfig"),
        ("", "cannot load kubeconfig"),
        ("apiVersion: v1\nkind: Config\n", "cannot load kubeconfig"),
        (GOOD.replace("current-context: x", "current-context: missing"), "missing"),
        (GOOD.replace('server: "https://127.0.0.1:6443"', "insecure-skip-tls-verify: true"), "server"),
    ],
)
def test_bad_kubeconfig_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None, reason: str
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KubeconfigError) as err:
        load_client(str(path))
    message = str(err.value)
    assert message.startswith(f"cannot load kubeconfig {path}: ")
    assert "\n" not in message and reason in message


def test_kubeconfig_env_is_named_when_no_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    missing = tmp_path / "nope" / "config"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    with pytest.raises(KubeconfigError) as err:
        load_client(None)
    assert (
        str(err.value) == f"cannot load kubeconfig {missing}: no such file, and no in-cluster config"
        " (KUBERNETES_SERVICE_HOST is not set; pass --kubeconfig or set KUBECONFIG)"
    )


NO_IN_CLUSTER = (
    ", and no in-cluster config (KUBERNETES_SERVICE_HOST is not set; pass --kubeconfig or set KUBECONFIG)"
)


def test_a_directory_says_so_and_every_env_failure_says_why_not_in_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial 49 W6: ``KUBECONFIG=DIR`` said "no such file"; an empty file's message lacked the "no
    in-cluster config" half the missing file's carries (found through $KUBECONFIG, the in-cluster
    config is the fallback the message must rule out). Named by --kubeconfig, the file alone counts."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeconfigError) as err:
        load_client(str(tmp_path))
    assert str(err.value) == f"cannot load kubeconfig {tmp_path}: is a directory"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path))
    with pytest.raises(KubeconfigError) as err:
        load_client(None)
    assert str(err.value) == f"cannot load kubeconfig {tmp_path}: is a directory{NO_IN_CLUSTER}"
    empty = tmp_path / "empty.kc"
    empty.write_text("")
    monkeypatch.setenv("KUBECONFIG", str(empty))
    with pytest.raises(KubeconfigError) as err:
        load_client(None)
    message = str(err.value)
    assert message.startswith(f"cannot load kubeconfig {empty}: ") and "empty" in message
    assert message.endswith(NO_IN_CLUSTER), message


def test_good_kubeconfig_gives_a_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = tmp_path / "kubeconfig"
    path.write_text(GOOD)
    api = load_client(str(path))
    assert api.configuration.host == "https://127.0.0.1:6443"


def test_kubeconfig_list_skips_missing_files_and_merges_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial 49 W1: ``KUBECONFIG=/missing:/good`` works with kubectl (client-go ``loader.go``
    skips missing entries of the list) and worked with the Python client ``run`` used before; it must
    not stop on the missing first entry. Two existing files are merged: the context of one can use the
    cluster of the other (``KubeConfigMerger``)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    good = tmp_path / "good"
    good.write_text(GOOD)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{good}")
    assert default_path(None) == str(good)
    assert load_client(None).configuration.host == "https://127.0.0.1:6443"
    clusters = tmp_path / "clusters"
    clusters.write_text(
        'apiVersion: v1\nkind: Config\nclusters: [{name: c2, cluster: {server: "https://127.0.0.2:6443"}}]\n'
    )
    contexts = tmp_path / "contexts"
    contexts.write_text(
        "apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: y, context: {cluster: c2, user: u}}]\ncurrent-context: y\n"
    )
    monkeypatch.setenv("KUBECONFIG", f"{clusters}:{tmp_path / 'missing'}:{contexts}")
    assert load_client(None).configuration.host == "https://127.0.0.2:6443"


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        ("/a", {"KUBECONFIG": "/b"}, "/a"),
        (None, {"KUBECONFIG": "/b:/c"}, "/b"),
        (None, {"KUBECONFIG": ""}, str(Path("~/.kube/config").expanduser())),
        (None, {}, str(Path("~/.kube/config").expanduser())),
    ],
)
def test_default_path(flag: str | None, env: dict[str, str], expected: str) -> None:
    assert default_path(flag, env) == expected


def test_run_without_a_cluster_is_one_line_before_kopf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`trtllm-operator run` with no kubeconfig and no in-cluster config: one line naming both and
    the fix, exit 2, and kopf never starts (it would retry the login forever; trial 48 V3)."""

    def kopf_started(*_: object, **__: object) -> None:
        raise AssertionError("run_operator was called without usable credentials")

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    missing = tmp_path / "nope"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    monkeypatch.setattr(run, "run_operator", kopf_started)
    assert main(["run", "-n", "x"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"trtllm-operator run: error: cannot load kubeconfig {missing}: no such file, and no in-cluster"
        " config (KUBERNETES_SERVICE_HOST is not set; pass --kubeconfig or set KUBECONFIG)\n"
    )


def test_run_takes_kubeconfig_as_the_cache_commands_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cache import`` and ``cache list`` take --kubeconfig; ``run`` had none. With it, the operator's
    own client (kopf's login and every handler use kube.client.default_kube) is the named file's, even
    where $KUBECONFIG names another."""
    from support.apistub import stub_server  # noqa: PLC0415

    from trtllm_operator import settings as settings_module  # noqa: PLC0415
    from trtllm_operator.kube import client as kube_client  # noqa: PLC0415

    seen: list[str] = []

    def kopf_started(*_: object, **__: object) -> None:
        seen.append(kube_client.default_kube().api_client.configuration.host)

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kube_client, "_default", None)  # restored after the test
    monkeypatch.setattr(settings_module, "_current", settings_module._current)  # run configures it
    monkeypatch.setattr(run, "run_operator", kopf_started)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    path = tmp_path / "kubeconfig"
    with stub_server() as stub:  # run asks the server before kopf starts (trial 49 W2)
        path.write_text(GOOD.replace("https://127.0.0.1:6443", stub.url))
        assert main(["run", "-n", "x", "--kubeconfig", str(path)]) == 0, capsys.readouterr().err
        assert seen == [stub.url]
    assert main(["run", "-n", "x", "--kubeconfig", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == (
        f"trtllm-operator run: error: cannot load kubeconfig {tmp_path / 'nope'}: no such file\n"
    )


UNREACHABLE = GOOD.replace("https://127.0.0.1:6443", "https://127.0.0.1:1")


def test_an_unreachable_api_server_ends_run_and_cache_list_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 49 W2: with a kubeconfig whose server does not answer, ``run`` retried for about 58 s, then
    exited 1 with ~250 lines (kopf's retries and tracebacks), and ``cache list`` printed an 86-line
    urllib3 traceback. ``run`` now tries the server before kopf starts, with kopf's retry schedule
    (kube.client.API_ERROR_BACKOFFS, shortened here), says once that it retries and ends with one line
    naming the server, the reason and the attempts, exit 1; kopf never starts. ``cache list``: one line."""
    from trtllm_operator.kube import client as kube_client  # noqa: PLC0415

    def kopf_started(*_: object, **__: object) -> None:
        raise AssertionError("run_operator was called although the API server does not answer")

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kube_client, "_default", None)
    monkeypatch.setattr(kube_client, "API_ERROR_BACKOFFS", (0, 0))
    monkeypatch.setattr(run, "run_operator", kopf_started)
    path = tmp_path / "kubeconfig"
    path.write_text(UNREACHABLE)
    assert main(["run", "-n", "x", "--kubeconfig", str(path)]) == 1
    assert capsys.readouterr().err == (
        "trtllm-operator run: note: cannot reach the API server https://127.0.0.1:1 (connection refused); "
        "retrying 2 times over 0 s\n"
        "trtllm-operator run: error: cannot reach the API server https://127.0.0.1:1 (connection refused) "
        "after 3 attempts\n"
    )
    assert main(["cache", "list", "--kubeconfig", str(path)]) == 1
    assert capsys.readouterr().err == (
        "trtllm-operator cache list: error: cannot reach the API server https://127.0.0.1:1 "
        "(connection refused)\n"
    )


def test_any_http_answer_is_a_reachable_api_server() -> None:
    """wait_for_api_server asks GET /version once when the server answers, whatever the status (a
    refusal of the credentials is kopf's to report), and sleeps kopf's backoffs between failed tries."""
    from support.apistub import stub_server  # noqa: PLC0415

    from trtllm_operator.kube.client import ApiServerUnreachableError, wait_for_api_server  # noqa: PLC0415

    slept: list[float] = []
    with stub_server() as stub:
        for status in (200, 401, 503):
            stub.answer = (status, {})
            wait_for_api_server(stub.api_client(), (1, 2), sleep=slept.append)
            assert [r.path for r in stub.take()] == ["/version"]
        url = stub.url
        api = stub.api_client()
    assert slept == []
    notes: list[str] = []
    with pytest.raises(ApiServerUnreachableError) as err:
        wait_for_api_server(api, (1, 2), on_retry=notes.append, sleep=slept.append)
    assert slept == [1, 2] and err.value.attempts == 3 and err.value.server == url
    assert notes == [f"cannot reach the API server {url} (connection refused); retrying 2 times over 3 s"]


def _config(name: str, server: str, namespace: str) -> str:
    return (
        f"apiVersion: v1\nkind: Config\nclusters: [{{name: c-{name}, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u-{name}, user: {{token: abc}}}}]\n"
        f"contexts: [{{name: {name}, context: {{cluster: c-{name}, user: u-{name}, "
        f"namespace: {namespace}}}}}]\n"
        f"current-context: {name}\n"
    )


def test_a_kubeconfig_list_uses_the_first_files_current_context_as_kubectl_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fresh-user trial 50 X1: ``KUBECONFIG=a:b``, each with a ``current-context``: kubectl uses a's
    (client-go ``loader.go`` ``Load``: non-map values are merged in reverse order, so the first file to
    set one wins); the Python client took b's (kubernetes-client/python PR #2386, open), so ``run``,
    ``cache list`` and ``cache import`` talked to another cluster than kubectl. The namespace a command
    defaults to is that context's too."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    first, second = tmp_path / "first.kc", tmp_path / "second.kc"
    first.write_text(_config("one", "https://127.0.0.1:1111", "ns-one"))
    second.write_text(_config("two", "https://127.0.0.2:2222", "ns-two"))
    for a, b, host, namespace in (
        (first, second, "https://127.0.0.1:1111", "ns-one"),
        (second, first, "https://127.0.0.2:2222", "ns-two"),
    ):
        monkeypatch.setenv("KUBECONFIG", f"{a}:{b}")
        assert load_client(None).configuration.host == host
        assert context_namespace(None) == namespace
    # a first file without current-context: the next one that sets it (kubectl: "first to set")
    clusters = tmp_path / "clusters.kc"
    clusters.write_text(
        _config("three", "https://127.0.0.3:3333", "x").replace("current-context: three\n", "")
    )
    monkeypatch.setenv("KUBECONFIG", f"{clusters}:{second}:{first}")
    assert load_client(None).configuration.host == "https://127.0.0.2:2222"


def test_kubeconfig_list_edges_follow_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fresh-user trial 50 X8: an empty file of the list is skipped (client-go ``Load``: no data is the
    empty config) where it was refused; a directory in the list is an error (client-go: "error
    loading config file … is a directory") where it was skipped; when no entry exists, the message
    names them all, not the first."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    good, empty = tmp_path / "good.kc", tmp_path / "empty.kc"
    good.write_text(GOOD)
    empty.write_text("")
    monkeypatch.setenv("KUBECONFIG", f"{empty}:{good}")
    assert load_client(None).configuration.host == "https://127.0.0.1:6443"
    directory = tmp_path / "dir.kc"
    directory.mkdir()
    monkeypatch.setenv("KUBECONFIG", f"{directory}:{good}")
    with pytest.raises(KubeconfigError) as err:
        load_client(None)
    assert str(err.value) == f"cannot load kubeconfig {directory}: is a directory{NO_IN_CLUSTER}"
    missing = f"{tmp_path / 'nope'}:{tmp_path / 'also-missing'}"
    monkeypatch.setenv("KUBECONFIG", missing)
    with pytest.raises(KubeconfigError) as err:
        load_client(None)
    none = "no such file (none of these 2 files exists)"
    assert str(err.value) == f"cannot load kubeconfig {missing}: {none}{NO_IN_CLUSTER}"


def test_a_refused_cache_list_says_the_api_servers_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 52 #13: a token without RBAC got "API error 403: Forbidden", naming neither the
    user nor what was refused; the API server's Status message says both, as kubectl prints it."""
    from support.apistub import stub_server  # noqa: PLC0415

    message = (
        'configmaps is forbidden: User "system:serviceaccount:default:nobody" cannot list resource '
        '"configmaps" in API group "" in the namespace "default"'
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with stub_server() as stub:
        stub.answer = (403, {"kind": "Status", "status": "Failure", "message": message, "code": 403})
        path = tmp_path / "kubeconfig"
        path.write_text(GOOD.replace("https://127.0.0.1:6443", stub.url))
        assert main(["cache", "list", "--kubeconfig", str(path), "-n", "default"]) == 1
    assert (
        capsys.readouterr().err == f"trtllm-operator cache list: error: API error 403 Forbidden: {message}\n"
    )


def test_a_rejected_token_in_cache_list_says_the_credentials_are_not_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 53 #9: a 401 printed "API error 401 Unauthorized: Unauthorized"; it says what
    run says of it (kube.access.credentials_refused)."""
    from support.apistub import stub_server  # noqa: PLC0415

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with stub_server() as stub:
        stub.answer = (401, {"kind": "Status", "status": "Failure", "message": "Unauthorized", "code": 401})
        path = tmp_path / "kubeconfig"
        path.write_text(GOOD.replace("https://127.0.0.1:6443", stub.url))
        assert main(["cache", "list", "--kubeconfig", str(path), "-n", "default"]) == 1
        err = capsys.readouterr().err
    assert err.startswith(
        f"trtllm-operator cache list: error: the API server {stub.url} does not accept the operator's "
        "credentials (401 Unauthorized: the token or client certificate is invalid or has expired"
    ), err
