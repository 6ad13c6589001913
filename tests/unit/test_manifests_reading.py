"""How ``render -f`` and ``simulate --deployment`` read manifests (``commands._manifests``, their one
home): input that is not YAML is one error line naming the file, the line and the column."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from trtllm_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "llama-3.1-8b-fp8-h100.yaml"
LLAMA_8B = REPO / "tests" / "fixtures" / "model-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
SIMULATE = [
    "simulate",
    "--trace",
    "poisson:rate=1,duration=10",
    "--model-config",
    str(LLAMA_8B),
    "--gpu",
    "H100",
]
#: What PyYAML says of ``kind: [`` followed by the end of the file.
UNCLOSED = "not valid YAML: expected the node content, but found '<stream end>' (while parsing a flow node)"


def _directory_with_a_broken_file(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "a.yaml")
    (tmp_path / "zz.yaml").write_text("kind: [\n")
    return tmp_path


@pytest.mark.parametrize("read", ["the directory", "the file"])
def test_render_names_the_file_line_and_column_of_a_yaml_error(
    read: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 44 F8: five ``render: error:`` lines of PyYAML's message, naming
    ``"<unicode string>", line 2`` and not the file — with ``-f DIR``, not which of its files."""
    directory = _directory_with_a_broken_file(tmp_path)
    path = directory if read == "the directory" else directory / "zz.yaml"
    assert main(["render", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"trtllm-operator render: error: {directory / 'zz.yaml'}: line 2, column 1: {UNCLOSED}\n"


def test_render_names_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PyYAML's reader errors give a character offset, not a line: it is turned into one."""
    monkeypatch.setattr("sys.stdin", io.StringIO("apiVersion: v1\nkind: \x07\n"))
    assert main(["render", "-f", "-"]) == 2
    assert capsys.readouterr().err == (
        "trtllm-operator render: error: standard input: line 2, column 7: not valid YAML: "
        "special characters are not allowed\n"
    )


def test_simulate_deployment_reads_through_the_same_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = _directory_with_a_broken_file(tmp_path)
    assert main([*SIMULATE, "--deployment", str(directory)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"trtllm-operator simulate: error: --deployment {directory / 'zz.yaml'}: "
        f"line 2, column 1: {UNCLOSED}\n"
    )
