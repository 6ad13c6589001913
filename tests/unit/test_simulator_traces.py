"""Trace readers and synthetic arrival processes of the simulator."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest

from trtllm_operator.simulate.traces import (
    MAX_SYNTHETIC_REQUESTS,
    Request,
    TraceError,
    load_trace,
    read_azure_csv,
    read_mooncake_jsonl,
    synthetic_gamma,
    synthetic_poisson,
    time_scale,
    window,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
AZURE = FIXTURES / "azure-llm-2023-conv-head800.csv"
MOONCAKE = FIXTURES / "mooncake-sample.jsonl"


def test_azure_fixture_keeps_the_original_crlf_format() -> None:
    raw = AZURE.read_bytes()
    assert raw.startswith(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
    assert raw.count(b"\r\n") == 800 and not raw.endswith(b"\n")


def test_azure_reader_rebases_and_keeps_sub_microsecond_timestamps() -> None:
    reqs = read_azure_csv(AZURE)
    assert len(reqs) == 800
    # First two rows: 18:15:46.6805900 (374, 44) and 18:15:50.9951690 (396, 109).
    assert reqs[0] == Request(0.0, 374, 44)
    assert reqs[1].arrival_s == pytest.approx(4.314579, abs=1e-6)
    assert (reqs[1].input_tokens, reqs[1].output_tokens) == (396, 109)
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(reqs))


def test_azure_reader_names_the_missing_column(tmp_path: Path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("TIMESTAMP,ContextTokens\r\n2023-11-16 18:15:46.6805900,374\r\n")
    with pytest.raises(TraceError, match="GeneratedTokens"):
        read_azure_csv(bad)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("yesterday,374,44", "TIMESTAMP"),
        ("2023-11-16 18:15:46.6805900,many,44", "ContextTokens"),
        ("2023-11-16 18:15:46.6805900,374,-1", "GeneratedTokens"),
    ],
)
def test_azure_reader_names_line_and_field(tmp_path: Path, row: str, field: str) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\r\n" + row + "\r\n")
    with pytest.raises(TraceError, match=rf":2: field '{field}'"):
        read_azure_csv(bad)


def test_zero_lengths_are_clamped_to_one_token() -> None:
    # An empty generation still emits the context phase's token; an empty prompt cannot run.
    reqs = read_azure_csv(AZURE)
    assert min(r.output_tokens for r in reqs) >= 1 and min(r.input_tokens for r in reqs) >= 1


def test_mooncake_reader_converts_milliseconds() -> None:
    reqs = read_mooncake_jsonl(MOONCAKE)
    assert [r.arrival_s for r in reqs] == pytest.approx([0.0, 27.482, 30.535, 35.419])
    assert reqs[0] == Request(0.0, 6955, 52)


def test_mooncake_reader_names_the_missing_field(tmp_path: Path) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text(json.dumps({"timestamp": 1, "input_length": 5}) + "\n")
    with pytest.raises(TraceError, match=":1: missing field 'output_length'"):
        read_mooncake_jsonl(bad)


@pytest.mark.parametrize(
    ("stamp", "shown"), [("1e400", "inf"), ("-1e400", "-inf"), ("NaN", "nan"), ("Infinity", "inf")]
)
def test_mooncake_reader_refuses_a_non_finite_timestamp_naming_the_line(
    tmp_path: Path, stamp: str, shown: str
) -> None:
    # Fresh-user trial 45 A15: Python's json reads 1e400 as inf and NaN as nan; the span check then
    # ended in a ValueError traceback instead of the FILE:LINE message of every other bad field.
    bad = tmp_path / "t.jsonl"
    ok = json.dumps({"timestamp": 0, "input_length": 10, "output_length": 5})
    bad.write_text(f'{ok}\n{{"timestamp": {stamp}, "input_length": 10, "output_length": 5}}\n')
    with pytest.raises(TraceError) as refused:
        load_trace(str(bad))
    assert str(refused.value) == (
        f"{bad}:2: field 'timestamp' must be a finite number of milliseconds, got {shown}"
    ), str(refused.value)


def test_poisson_is_seeded_and_has_the_asked_rate() -> None:
    a = synthetic_poisson(50.0, 400.0, seed=7)
    assert a == synthetic_poisson(50.0, 400.0, seed=7)
    assert a != synthetic_poisson(50.0, 400.0, seed=8)
    expected = 50.0 * 400.0
    assert abs(len(a) - expected) < 4 * expected**0.5  # Poisson: sd = sqrt(mean)


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_interarrivals_have_the_asked_coefficient_of_variation(cv: float) -> None:
    reqs = synthetic_gamma(100.0, 300.0, cv=cv, seed=1)
    gaps = [b.arrival_s - a.arrival_s for a, b in itertools.pairwise(reqs)]
    measured = statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert measured == pytest.approx(cv, rel=0.15)
    assert statistics.fmean(gaps) == pytest.approx(0.01, rel=0.15)


def test_synthetic_lengths_can_be_resampled_from_a_trace() -> None:
    pairs = [(r.input_tokens, r.output_tokens) for r in read_azure_csv(AZURE)]
    reqs = synthetic_poisson(10.0, 60.0, seed=3, lengths=pairs)
    assert {(r.input_tokens, r.output_tokens) for r in reqs} <= set(pairs)


def test_load_trace_dispatches_by_suffix_and_spec() -> None:
    assert len(load_trace(AZURE)) == 800
    assert len(load_trace(MOONCAKE)) == 4
    spec = load_trace("gamma:rate=20,duration=30,cv=2,isl=100,osl=10,seed=4")
    assert spec and all((r.input_tokens, r.output_tokens) == (100, 10) for r in spec)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("poisson:rate=5", "'rate' .* and 'duration'"),
        ("poisson:rate=5,duration=10,burst=3", "unknown key"),
        ("poisson:rate=-1,duration=10", "'rate' must be > 0"),
        ("/no/such/trace.csv", "no such file"),
    ],
)
def test_load_trace_errors_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        load_trace(spec)


def test_time_scale_and_window() -> None:
    reqs = [Request(0.0, 1, 1), Request(10.0, 2, 2), Request(20.0, 3, 3)]
    assert [r.arrival_s for r in time_scale(reqs, 10)] == [0.0, 1.0, 2.0]
    assert window(reqs, 5.0, 20.0) == [Request(5.0, 2, 2)]
    with pytest.raises(TraceError, match="--time-scale"):
        time_scale(reqs, 0)


@pytest.mark.parametrize("spec", ["poisson:rate=1e9,duration=10", "gamma:rate=1,duration=1e12,cv=2"])
def test_a_synthetic_trace_too_large_to_hold_is_refused(spec: str) -> None:
    """Fresh-user trial: ``--trace poisson:rate=1e9,duration=10`` ran until out of memory."""
    with pytest.raises(TraceError) as exc:
        load_trace(spec)
    message = str(exc.value)
    assert message.startswith(f"--trace {spec!r}: rate × duration = ")
    assert "1,000,000" in message and "lower 'rate' or 'duration'" in message


@pytest.mark.parametrize(
    ("spec", "product"),
    [
        ("poisson:rate=1000,duration=1001", "1,000 × 1,001 = 1,001,000"),
        ("poisson:rate=0.5,duration=2000001", "0.5 × 2,000,001 = 1,000,000.5"),
        ("gamma:rate=1e9,duration=10,cv=2", "1,000,000,000 × 10 = 10,000,000,000"),
    ],
)
def test_the_synthetic_cap_message_prints_the_product_exactly(spec: str, product: str) -> None:
    """Fresh-user trial 40 F7: "1000 × 1001 = 1e+06 requests, more than the 1,000,000" printed the
    product rounded, so it read as equal to the limit. It is the expected count that is capped."""
    with pytest.raises(TraceError) as exc:
        load_trace(spec)
    assert f"rate × duration = {product} expected requests, more than the 1,000,000" in str(exc.value)


def test_the_synthetic_cap_is_on_the_expected_count_as_documented() -> None:
    """Fresh-user trial 40 F7: docs/simulator.md said a synthetic trace "may be at most 1,000,000
    requests", but the check is on rate × duration and a Poisson draw may exceed it. The docs say
    what is capped; a trace of exactly the cap's expected count is taken."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "simulator.md").read_text()
    assert "its expected count rate × duration may be at most 1,000,000 requests" in docs
    assert f"{MAX_SYNTHETIC_REQUESTS:,}" == "1,000,000"
    with pytest.raises(TraceError):
        load_trace("poisson:rate=1000,duration=1000.001")


def test_a_trace_that_is_not_a_regular_file_says_what_it_is(tmp_path: Path) -> None:
    """Fresh-user trial 40 F8: ``--trace /dev/null`` said "no such file"."""
    with pytest.raises(TraceError, match=r"'/dev/null': not a regular file \(it is a character device\)"):
        load_trace("/dev/null")
    with pytest.raises(TraceError, match=r"not a regular file \(it is a directory\)"):
        load_trace(str(tmp_path))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(TraceError, match=r"the file is empty \(0 bytes\)"):
        load_trace(str(empty))
    with pytest.raises(TraceError, match="no such file"):
        load_trace(str(tmp_path / "missing.csv"))


def test_a_synthetic_trace_duration_must_be_finite() -> None:
    # A spec refuses "inf" as a number (fresh-user trial 43 F4: the number syntax is decimal digits);
    # the generator refuses an infinite duration given to it directly.
    with pytest.raises(TraceError, match="duration='inf' is not a number"):
        load_trace("poisson:rate=0.000001,duration=inf")
    with pytest.raises(TraceError, match="'duration' must be > 0 s, got inf"):
        synthetic_poisson(0.000001, float("inf"))


def test_an_empty_trace_path_says_it_is_empty() -> None:
    """Fresh-user trial 41 (left-over, low): ``--trace ''`` said "not a regular file (it is a
    directory)": ``Path('')`` is the working directory. The path is empty, and the message says what
    to give instead."""
    with pytest.raises(TraceError) as exc:
        load_trace("")
    message = str(exc.value)
    assert message.startswith("--trace '': the path is empty; give the path of an Azure .csv"), message
    assert "directory" not in message, message


@pytest.mark.parametrize(
    ("spec", "product"),
    [
        # 300 digits before (the float 1e300 written out in full)
        ("poisson:rate=1e300,duration=10", "1e+300 × 10 = 1.00000e+301"),
        ("gamma:rate=1e-300,duration=1e307", "1e-300 × 1e+307 = 10,000,000"),
        # float noise before: 1,000,800.0700000001 and 1,000,000.0300000001
        ("poisson:rate=1000.1,duration=1000.7", "1,000.1 × 1,000.7 = 1,000,800.07"),
        ("poisson:rate=0.1,duration=10000000.3", "0.1 × 10,000,000.3 = 1,000,000.03"),
        # rounded to 3 decimals, it would read as the cap: written in full
        ("poisson:rate=0.1,duration=10000000.000001", "0.1 × 10,000,000.000001 = 1,000,000.0000001"),
        ("poisson:rate=123456.789012345,duration=98.7654321098765", "= 12,193,263.114"),
    ],
)
def test_the_synthetic_cap_message_prints_bounded_exact_figures(spec: str, product: str) -> None:
    """Fresh-user trial 41 (left-over, low): a huge rate printed a 300-digit number, and a product of
    two decimals printed float noise. The figures are the decimal product of the values as given,
    at most 3 decimals unless that would hide that it is above the cap, scientific from 10^15 on."""
    with pytest.raises(TraceError) as exc:
        load_trace(spec)
    message = str(exc.value)
    assert f"{product} expected requests, more than the 1,000,000" in message, message
    assert len(message) < 400, message


@pytest.mark.timeout(60)
def test_a_cv_whose_gaps_are_all_zero_is_refused_at_the_generated_cap_not_run_out_of_memory() -> None:
    # Fresh-user trial 43 F1: gamma with cv=1e10 made almost every gap 0.0 s, so the expected-count cap
    # (rate × duration = 10) never stopped it; it grew until the machine ran out of memory.
    with pytest.raises(TraceError) as refused:
        load_trace("gamma:rate=1,duration=10,cv=1e10")
    text = str(refused.value)
    assert "2,000,000 requests" in text and "lower 'cv'" in text, text


def test_a_cv_whose_gamma_shape_underflows_is_refused_naming_cv() -> None:
    # Fresh-user trial 43 F2: cv=1e300 made 1/cv² = 0.0 and ended in a ZeroDivisionError traceback.
    with pytest.raises(TraceError) as refused:
        load_trace("gamma:rate=1,duration=10,cv=1e300")
    assert "'cv' = 1e+300 is too large" in str(refused.value), str(refused.value)


@pytest.mark.parametrize("cv", ["1e-200", "1e-160", "1.5e-154", "1e-151"])
def test_a_cv_whose_gamma_shape_overflows_is_refused_naming_cv_and_the_smallest_accepted(cv: str) -> None:
    # Fresh-user trial 45 A4: cv=1e-200 made cv² = 0.0 (ZeroDivisionError traceback), cv=1e-160 made
    # 1/cv² = inf (ValueError traceback from random.gammavariate).
    with pytest.raises(TraceError) as refused:
        load_trace(f"gamma:rate=1,duration=10,cv={cv}")
    text = str(refused.value)
    assert f"'cv' = {float(cv)} is too small" in text and "the smallest cv accepted is 1e-150" in text, text
    assert load_trace("gamma:rate=1,duration=10,cv=1e-150")  # the smallest accepted runs: a clock


@pytest.mark.parametrize(
    ("lengths", "said"),
    [
        ("isl=0", "isl=0: a request's prompt has at least one token"),
        ("isl=-5", "isl=-5: a request's prompt has at least one token"),
        ("osl=0", "osl=0: a request generates at least one token"),
    ],
)
def test_a_synthetic_length_below_one_token_is_refused_naming_the_key_and_the_fix(
    lengths: str, said: str
) -> None:
    """Fresh-user trial 43 F3: ``isl=0`` was accepted (the generator turned it into 1-token prompts
    without a word); a request with an empty prompt is not one Triton/TensorRT-LLM serves."""
    with pytest.raises(TraceError) as refused:
        load_trace(f"poisson:rate=1,duration=10,{lengths}")
    text = str(refused.value)
    key = lengths.partition("=")[0]
    assert said in text and f"use {key}=1 or more" in text, text


def test_a_key_given_twice_is_refused_naming_it() -> None:
    """Fresh-user trial 43 F4: ``rate=1,duration=10,rate=2`` ran with the last rate."""
    for spec, key in (
        ("poisson:rate=1,rate=2,duration=10", "rate"),
        ("gamma:rate=1,duration=10,cv=2,cv=2", "cv"),
    ):
        with pytest.raises(TraceError) as refused:
            load_trace(spec)
        assert f"{key!r} is given twice; give each key once" in str(refused.value), str(refused.value)
    # The seed of the command line (simulate --seed) is no second key: the spec's own wins.
    assert load_trace("poisson:rate=5,duration=10,seed=3", seed=9) == load_trace(
        "poisson:rate=5,duration=10", seed=3
    )


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("rate=1_000", "rate='1_000' is not a number; write decimal digits with an optional sign, fraction"),
        ("rate=0x10", "rate='0x10' is not a number"),
        ("rate=nan", "rate='nan' is not a number"),
        ("duration=1 0", "duration='1 0' is not a number"),
        ("cv=1_0", "cv='1_0' is not a number"),
        ("isl=1_000", "isl='1_000' is not a number"),
        ("seed=1.5", "seed=1.5 is not a whole number; give an integer"),
        ("osl=2.5", "osl=2.5 is not a whole number"),
        ("isl=1e999", "isl=1e999 is too large for a number"),
    ],
)
def test_every_numeric_key_takes_one_number_syntax(value: str, said: str) -> None:
    """Fresh-user trial 43 F4: ``rate=1_000`` ran as 1000 (Python's float() takes underscores), and
    ``seed``/``isl``/``osl`` were cut to whole numbers silently. Every key takes decimal digits with an
    optional sign, fraction and exponent; seed, isl and osl a whole number."""
    key, _, written = value.partition("=")
    keys = {"rate": "1", "duration": "10", "cv": "2"} | {key: written}
    with pytest.raises(TraceError) as refused:
        load_trace("gamma:" + ",".join(f"{k}={v}" for k, v in keys.items()))
    assert said in str(refused.value), str(refused.value)


def test_numbers_as_written_before_are_taken() -> None:
    spaced = load_trace("gamma: rate = 2 , duration=1e1,cv=+2.0,isl=1e2,osl=10.,seed=0")
    assert spaced == load_trace("gamma:rate=2,duration=10,cv=2,isl=100,osl=10,seed=0")
    assert spaced and all((r.input_tokens, r.output_tokens) == (100, 10) for r in spaced)


@pytest.mark.parametrize(
    "spec",
    [
        "poisson:rate=5",  # a required key missing
        "poisson:rate=5,duration=10,burst=3",  # an unknown key
        "poisson:rate",  # no '='
        "poisson:rate=1,rate=2,duration=10",  # a key twice
        "poisson:rate=1_000,duration=10",  # not the number syntax
        "poisson:rate=1,duration=10,isl=0",  # a length below 1
        "poisson:rate=-1,duration=10",  # the generator's range check
        "gamma:rate=1,duration=10,cv=1e300",  # the generator's cv check
        "poisson:rate=1e9,duration=10",  # the cap
        "poisson:rate=1e-300,duration=1e300",  # no request drawn
    ],
)
def test_every_synthetic_spec_error_starts_with_the_flag_and_the_spec_as_typed(spec: str) -> None:
    """Fresh-user trial 43 F5: the spec's own errors began "synthetic trace '…'", the generator's
    "--trace '…'" (with a ",seed=0" the user had not typed, through the CLI). One prefix: the flag and
    the value as typed."""
    with pytest.raises(TraceError) as refused:
        load_trace(spec)
    assert str(refused.value).startswith(f"--trace {spec!r}: "), str(refused.value)


def test_a_trace_without_requests_says_what_to_change(tmp_path: Path) -> None:
    """Fresh-user trial 43 F5: ``poisson:rate=1e-300,duration=1e300`` said "has no requests" with no
    fix; a trace file with a header only said the same."""
    with pytest.raises(TraceError) as refused:
        load_trace("poisson:rate=1e-300,duration=1e300")
    text = str(refused.value)
    assert "the draw holds no request" in text and "1e-300 × 1e+300 = 1 expected requests" in text, text
    # Its duration is beyond the span a trace may have (MAX_TRACE_SPAN_S): raising it would not do.
    assert "raise 'rate' ('duration' is above the 86,400 s a trace may span) so that their" in text, text
    with pytest.raises(TraceError) as refused:
        load_trace("poisson:rate=1e-9,duration=1000")
    assert "raise 'rate' or 'duration' so that their product is well above 1" in str(refused.value)
    header = tmp_path / "header.csv"
    header.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
    with pytest.raises(TraceError) as refused:
        load_trace(str(header))
    assert "the file holds no request (a header or blank lines only); give a trace with" in str(refused.value)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_trace_that_is_not_utf8_is_refused_naming_the_file_and_line(tmp_path: Path, suffix: str) -> None:
    # Fresh-user trial 45 A17: a 0xff byte in a JSONL string field was a UnicodeDecodeError traceback.
    bad = tmp_path / f"t{suffix}"
    if suffix == ".jsonl":
        bad.write_bytes(b'{"timestamp": 0, "input_length": 10, "output_length": 5, "note": "\xff"}\n')
        line, offset = 1, 66
    else:
        bad.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,10,5\xe9\n")
        line, offset = 2, 72
    with pytest.raises(TraceError) as refused:
        load_trace(str(bad))
    byte = 0xFF if suffix == ".jsonl" else 0xE9
    assert str(refused.value) == (
        f"{bad}:{line}: not UTF-8 text (byte 0x{byte:02x} at offset {offset}); save the trace as UTF-8"
    ), str(refused.value)
