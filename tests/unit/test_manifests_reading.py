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


def _with_a_second_replicas(tmp_path: Path) -> tuple[Path, int]:
    """The 8B example with ``replicas: 7`` added under its LLMDeployment's ``replicas: 2`` (a
    merge-conflict resolution that kept both); returns the file and the first line's number."""
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line == "  replicas: 2\n")
    lines.insert(first + 1, "  replicas: 7\n")
    path = tmp_path / "dupkey.yaml"
    path.write_text("".join(lines))
    return path, first + 1


def test_a_key_given_twice_is_refused_naming_the_file_the_key_and_both_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 44 F23: render took the last ``replicas`` (7) silently and simulate ran
    ``static:7``; ``kubectl apply`` (strict field validation, its default) refuses duplicate fields."""
    path, line = _with_a_second_replicas(tmp_path)
    said = (
        f"{path}: line {line + 1}, column 3: key 'replicas' is given twice in one mapping (lines {line} "
        f"and {line + 1}): kubectl apply refuses duplicate fields (strict field validation, its default); "
        "keep one\n"
    )
    assert main(["render", "-f", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"trtllm-operator render: error: {said}" and captured.out == ""
    assert main([*SIMULATE, "--deployment", str(path)]) == 2
    assert capsys.readouterr().err == f"trtllm-operator simulate: error: --deployment {said}"


def test_a_key_merged_in_and_written_is_not_a_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """YAML's merge key: an explicit key overrides a merged one (not two values for one key), and the
    keys of two different mappings may be equal."""
    text = EXAMPLE.read_text().replace("  replicas: 2\n", "  <<: {replicas: 5}\n  replicas: 2\n", 1)
    assert text != EXAMPLE.read_text()
    path = tmp_path / "merged.yaml"
    path.write_text(text)
    assert main(["render", "-f", str(path)]) == 0, capsys.readouterr().err
    merged = capsys.readouterr().out
    assert main(["render", "-f", str(EXAMPLE)]) == 0
    assert merged == capsys.readouterr().out  # replicas: 2, as written


#: Files that are not UTF-8, each with the line, the first byte that is not and its offset.
NOT_UTF8 = {
    "latin-1": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n".encode("latin-1"),
        3,
        0xE9,
        51,
    ),
    "utf-16 with a BOM": ("apiVersion: v1\nkind: ConfigMap\n".encode("utf-16"), 1, 0xFF, 0),
    "binary": (b"\x00\x01\x02\n\x89PNG\r\n", 2, 0x89, 4),
}


@pytest.mark.parametrize("kind", sorted(NOT_UTF8))
@pytest.mark.parametrize("command", ["render -f FILE", "render -f DIR", "simulate --deployment FILE"])
def test_a_file_that_is_not_utf8_is_one_error_line_naming_it(
    kind: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 45 A17: a UnicodeDecodeError traceback from ``render -f FILE`` and ``-f DIR``,
    and from ``simulate --deployment`` a message naming no file."""
    data, line, byte, offset = NOT_UTF8[kind]
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(data)
    shutil.copy(EXAMPLE, tmp_path / "a.yaml")
    said = f"{bad}: line {line}: not UTF-8 text (byte 0x{byte:02x} at offset {offset}): "
    if command == "simulate --deployment FILE":
        assert main([*SIMULATE, "--deployment", str(bad)]) == 2
        said = f"--deployment {said}"
    else:
        assert main(["render", "-f", str(tmp_path if command.endswith("DIR") else bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trtllm-operator {command.split(maxsplit=1)[0]}: error: {said}"), err
    assert err.count("\n") == 1, err


def test_a_nan_anywhere_in_the_file_is_refused_as_kubectl_refuses_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 52 #6: a ``.nan`` in metadata.annotations, or in a ConfigMap beside the
    manifests, rendered with rc 0 — kubectl cannot turn it into JSON and refuses the file (v1.34.4:
    "error converting YAML to JSON: json: unsupported value: NaN"). ``simulate --deployment`` reads the
    same way."""
    text = EXAMPLE.read_text()
    path = tmp_path / "in.yaml"
    path.write_text(text + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: .nan}\n")
    assert main(["render", "-f", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"trtllm-operator render: error: {path}: document 3: data.a: Invalid value: .nan: not a finite "
        "number, which JSON cannot carry (kubectl refuses the file: error converting YAML to JSON: json: "
        "unsupported value: NaN); write a finite number, or quote it where a string is meant\n"
    )
    path.write_text(
        text.replace("name: llama-3-1-8b-fp8\n", "name: llama-3-1-8b-fp8\n  annotations: {a: -.inf}\n", 1)
    )
    assert "annotations: {a: -.inf}" in path.read_text()
    assert main([*SIMULATE, "--deployment", str(path)]) == 2
    assert ": metadata.annotations.a: Invalid value: -.inf: " in capsys.readouterr().err


def test_an_exponent_without_a_dot_is_a_number_as_kubectl_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 52 #5: ``requestsPerSecond: 1e1`` was refused as "'1e1': must be of type
    number" (PyYAML's YAML 1.1 float wants a dot); kubectl's go-yaml reads it as 10.0."""
    capacity = REPO / "examples" / "capacity-autoscaled-deployment.yaml"
    path = tmp_path / "in.yaml"
    path.write_text(capacity.read_text().replace("requestsPerSecond: 9.4", "requestsPerSecond: 94e-1"))
    assert "requestsPerSecond: 94e-1" in path.read_text()
    assert main(["render", "-f", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("written", "read"),
    [
        # go-yaml v2 resolve.go (what kubectl reads through sigs.k8s.io/yaml): ParseInt base 0 after
        # removing underscores, then ParseUint, then ParseFloat when yamlStyleFloat matches, else a string
        ("1e1", 10.0),
        ("1E+3", 1000.0),
        ("1_0e1", 100.0),
        ("0o17", 15),
        ("017", 15),
        ("0x10", 16),
        ("0b101", 5),
        ("1_000", 1000),
        ("+5", 5),
        ("08", 8.0),  # not octal: a float, as ParseFloat reads it
        ("1:04", "1:04"),  # YAML 1.1 sexagesimal, which go-yaml does not read: a string
        ("1e400", "1e400"),  # ParseFloat's ErrRange: a string
        ("99999999999999999999", 1e20),  # beyond uint64: a float
        ("18446744073709551615", 18446744073709551615),  # ParseUint
        (".inf", float("inf")),
        ("yes", True),
    ],
)
def test_numbers_read_as_kubectl_reads_them(written: str, read: object) -> None:
    """Fresh-user trials 52 #5 and 53 #3/#4: PyYAML's YAML 1.1 resolution differed from kubectl's."""
    import tempfile  # noqa: PLC0415

    from trtllm_operator.commands._manifests import read_objects  # noqa: PLC0415

    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(f"kind: X\nvalue: {written}\n")
        f.flush()
        if isinstance(read, float) and read == float("inf"):
            with pytest.raises(Exception, match="not a finite number"):
                read_objects(f.name)
            return
        ((_, doc),) = read_objects(f.name)
    assert doc["value"] == read and type(doc["value"]) is type(read), doc["value"]


def test_numbers_kubectl_takes_render_as_the_api_server_stores_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fresh-user trial 53: ``cpu: 1e1`` (a float since 52 #5's fix) was refused as "should be a valid
    string" (the API server takes an integral JSON number as an integer); a maxReplicas beyond int64
    raised a cel-python traceback; non-string annotation values passed."""
    capacity = (REPO / "examples" / "capacity-autoscaled-deployment.yaml").read_text()
    path = tmp_path / "in.yaml"
    path.write_text(capacity.replace('cpu: "16"', "cpu: 1e1").replace("memory: 128Gi", "memory: 1e10"))
    assert "cpu: 1e1" in path.read_text() and "memory: 1e10" in path.read_text()
    assert main(["render", "-f", str(path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    path.write_text(capacity.replace("maxReplicas: 64", "maxReplicas: 9223372036854775808"))
    assert "maxReplicas: 9223372036854775808" in path.read_text()
    assert main(["render", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        "Traceback" not in err
        and ("spec.autoscaling.maxReplicas: Invalid value: 9223372036854775808: must be of type integer")
        in err
    ), err
    path.write_text(
        capacity.replace(
            "name: llama-3-1-70b-capacity\n", "name: llama-3-1-70b-capacity\n  annotations: {a: 5}\n", 1
        )
    )
    assert "annotations: {a: 5}" in path.read_text()
    assert main(["render", "-f", str(path)]) == 2
    assert "metadata.annotations.a: Invalid value: 5: must be a string" in capsys.readouterr().err
