"""Request traces: readers for public trace formats and seeded synthetic arrival processes.

A trace is a list of :class:`Request` sorted by arrival time, with times in seconds relative to the
first request. Formats:

- **Azure LLM inference trace** (Azure/AzurePublicDataset, ``AzureLLMInferenceTrace_{conv,code}.csv``;
  Patel et al., "Splitwise", ISCA 2024): CSV with header ``TIMESTAMP,ContextTokens,GeneratedTokens``,
  wall-clock timestamps such as ``2023-11-16 18:15:46.6805900`` (7 fractional digits), CRLF line ends.
- **Mooncake-style JSONL** (kvcache-ai/Mooncake traces): one JSON object a line with ``timestamp``
  (milliseconds), ``input_length`` and ``output_length``; other keys (``hash_ids``) are ignored.
- **Synthetic**: Poisson arrivals (exponential inter-arrival times) or gamma-distributed inter-arrival
  times with a given coefficient of variation (burstier than Poisson when cv > 1), seeded, with
  request lengths either fixed or resampled from another trace.

Errors: :class:`TraceError` (a ``ValueError``) naming the file, line and field.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from pathlib import Path

from trtllm_operator.utf8 import first_non_utf8


class TraceError(ValueError):
    """A trace file or synthetic-trace specification is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request: arrival time in seconds from the trace start, prompt and output length in tokens."""

    arrival_s: float
    input_tokens: int
    output_tokens: int


AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _positive_int(value: str | int | float, where: str, field: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise TraceError(f"{where}: field {field!r} must be an integer, got {value!r}") from None
    if number < 0:
        raise TraceError(f"{where}: field {field!r} must be >= 0, got {number}")
    return number


def _rebase(pairs: list[tuple[float, int, int]]) -> list[Request]:
    pairs.sort(key=lambda p: p[0])
    if not pairs:
        return []
    start = pairs[0][0]
    # A request that generates nothing still produces one token in TensorRT-LLM (the context phase
    # emits the first token), so output lengths are clamped to >= 1; inputs too (an empty prompt
    # cannot be scheduled).
    return [Request(t - start, max(1, i), max(1, o)) for t, i, o in pairs]


def _not_utf8(path: Path) -> TraceError:
    """The error for a trace file that is not UTF-8 text (a Latin-1 byte, UTF-16, a binary file), naming
    the file, the line and the first byte that is not (fresh-user trial 45 A17: a traceback)."""
    bad = first_non_utf8(path)
    if bad is None:  # pragma: no cover - the file changed between reads
        return TraceError(f"{path}: not UTF-8 text")
    return TraceError(
        f"{path}:{bad.line}: not UTF-8 text (byte 0x{bad.byte:02x} at offset {bad.offset}); "
        "save the trace as UTF-8"
    )


def read_azure_csv(path: str | Path) -> list[Request]:
    """Read an Azure LLM inference trace CSV: :func:`_read_azure_csv`; a file that is not UTF-8 is a
    :class:`TraceError` naming it (:func:`_not_utf8`)."""
    try:
        return _read_azure_csv(Path(path))
    except UnicodeDecodeError:
        raise _not_utf8(Path(path)) from None


def _read_azure_csv(path: Path) -> list[Request]:
    """Read an Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``).

    Timestamps are parsed as wall-clock times (any number of fractional digits; Python keeps
    microseconds) and rebased so that the first request arrives at 0 s. Raises :class:`TraceError`
    for a missing column or a malformed row, naming the line.
    """
    path = Path(path)
    rows: list[tuple[float, int, int]] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in AZURE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(
                f"{path}: missing column(s) {', '.join(missing)}; an Azure trace has the header "
                f"{','.join(AZURE_COLUMNS)}"
            )
        for line_no, row in enumerate(reader, start=2):
            where = f"{path}:{line_no}"
            stamp = (row["TIMESTAMP"] or "").strip()
            try:
                # fromisoformat keeps 6 fractional digits; cut the 7th (100 ns) explicitly so that
                # older Pythons accept it too.
                head, _, frac = stamp.partition(".")
                when = datetime.fromisoformat(f"{head}.{frac[:6]}" if frac else head)
            except ValueError:
                raise TraceError(
                    f"{where}: field 'TIMESTAMP' must look like 2023-11-16 18:15:46.6805900, got {stamp!r}"
                ) from None
            rows.append(
                (
                    when.timestamp(),
                    _positive_int(row["ContextTokens"], where, "ContextTokens"),
                    _positive_int(row["GeneratedTokens"], where, "GeneratedTokens"),
                )
            )
    return _rebase(rows)


def read_mooncake_jsonl(path: str | Path) -> list[Request]:
    """Read a Mooncake-style JSONL trace (``timestamp`` in ms, ``input_length``, ``output_length``); a
    file that is not UTF-8 is a :class:`TraceError` naming it (:func:`_not_utf8`)."""
    try:
        return _read_mooncake_jsonl(Path(path))
    except UnicodeDecodeError:
        raise _not_utf8(Path(path)) from None


def _read_mooncake_jsonl(path: Path) -> list[Request]:
    path = Path(path)
    rows: list[tuple[float, int, int]] = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{where}: not a JSON object ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise TraceError(f"{where}: each line must be a JSON object")
            for key in ("timestamp", "input_length", "output_length"):
                if key not in obj:
                    raise TraceError(f"{where}: missing field {key!r}")
            try:
                stamp_ms = float(obj["timestamp"])
            except (TypeError, ValueError):
                raise TraceError(f"{where}: field 'timestamp' must be a number of milliseconds") from None
            if not math.isfinite(stamp_ms):  # Python's json reads 1e400 as inf and NaN as nan (trial 45 A15)
                raise TraceError(
                    f"{where}: field 'timestamp' must be a finite number of milliseconds, got {stamp_ms}"
                )
            rows.append(
                (
                    stamp_ms / 1000.0,
                    _positive_int(obj["input_length"], where, "input_length"),
                    _positive_int(obj["output_length"], where, "output_length"),
                )
            )
    return _rebase(rows)


def _lengths(
    rng: random.Random, lengths: Sequence[tuple[int, int]] | None, isl: int, osl: int
) -> tuple[int, int]:
    if lengths:
        return lengths[rng.randrange(len(lengths))]
    return isl, osl


#: The most requests a synthetic trace may be asked for: a bound on the expected count rate × duration,
#: the one number the user chooses (the generated count is a random draw around it: a Poisson trace
#: of 1,000,000 expected requests holds about 1,000,000 ± 3,000; fresh-user trial 40 F7, docs/simulator.md).
#: The generator keeps every request in memory, so ``rate=1e9,duration=10`` would run until the machine
#: is out of it. The largest trace in benchmarks/ is about 20,000 requests.
MAX_SYNTHETIC_REQUESTS = 1_000_000
#: What a generated trace may hold at most: the expected count's cap with room for the variation
#: around it (a Poisson count of mean 10^6 has a standard deviation of 10^3).
MAX_GENERATED_REQUESTS = 2 * MAX_SYNTHETIC_REQUESTS


#: The longest a trace may span, in simulated seconds from its start to its last arrival (after
#: ``--time-scale``): one day, a whole diurnal cycle. A simulation's cost grows with the simulated time,
#: not only with the requests: every second it samples each Ready replica's metrics (keeping only the
#: samples the policy can still read, about ``sync_period_s + metrics_lag_s`` of them: memory does not
#: grow with the simulated time, trial 45 A18), every ``sync_period_s`` (15 s) it runs the policy
#: (:mod:`trtllm_operator.simulate.engine`). A day of one idle replica took about 2 s and 52 MiB peak
#: resident memory, of 16 replicas 15 s and 52 MiB (measured 2026-12-04 on a loaded 2-core machine; the
#: time grows with replicas × simulated seconds), while ``rate=1e-6,duration=1e12`` — a million
#: requests, within :data:`MAX_SYNTHETIC_REQUESTS` — asked for 10^12 s and did not end
#: (fresh-user trial 43 F1).
MAX_TRACE_SPAN_S = 86_400


#: Above this a figure of the cap message is written in scientific notation (``1.00000e+310``): it is
#: far above the cap either way, and written out it ran to 300 digits (fresh-user trial 41).
_FIXED_BELOW = Decimal(10) ** 15


def _expected_count(rate_per_s: float, duration_s: float) -> Decimal:
    """rate × duration as the decimal product of the two values as written (each float's shortest
    round-trip form), computed exactly: ``1000.1 × 1000.7`` is 1,000,800.07, not the float product's
    1,000,800.0700000001 (fresh-user trial 41). Both are finite (checked before)."""
    with localcontext() as ctx:
        ctx.prec = 64  # two factors of at most 17 significant digits: the product is exact
        return Decimal(repr(rate_per_s)) * Decimal(repr(duration_s))


def _factor(value: float) -> str:
    """``rate`` or ``duration`` as given (the float's shortest round-trip form, at most 17 significant
    digits), thousands separated (``1,000.1``); scientific (``1e+300``, ``1e-09``) from 10^15 on and
    below 10^-6, where written out it would run to hundreds of digits."""
    exact = Decimal(repr(value))
    if exact >= _FIXED_BELOW or exact < Decimal("1e-6"):
        return f"{exact:e}"
    text = f"{exact:,f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _figure(value: Decimal) -> str:
    """The expected count of the cap message, bounded and exact enough: below 10^15 with thousands separators
    and at most 3 decimals (``1,001,000``, ``1,000,000.5``); a value above the cap whose rounding
    would print it as the cap or below is written in full, so a count just above it never reads as
    equal to it (fresh-user trial 40 F7: ``1e+06`` for 1,001,000); from 10^15 on, 6 significant
    digits in scientific notation (``1.00000e+310``), not 300 digits (fresh-user trial 41)."""
    if value >= _FIXED_BELOW:
        return f"{value:.5e}"
    shown = value.quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN)
    if value > MAX_SYNTHETIC_REQUESTS >= shown:
        shown = value  # at most 34 significant digits: the two factors' 17 each
    text = f"{shown:,f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def synthetic_poisson(
    rate_per_s: float,
    duration_s: float,
    *,
    seed: int = 0,
    input_tokens: int = 1000,
    output_tokens: int = 250,
    lengths: Sequence[tuple[int, int]] | None = None,
) -> list[Request]:
    """Poisson arrivals at ``rate_per_s`` for ``duration_s`` seconds, seeded.

    Lengths are ``(input_tokens, output_tokens)`` for every request, or drawn uniformly from
    ``lengths`` (e.g. the (input, output) pairs of a real trace).
    """
    return synthetic_gamma(
        rate_per_s,
        duration_s,
        cv=1.0,
        seed=seed,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        lengths=lengths,
    )


#: The smallest ``cv`` a gamma trace takes: its shape 1/cv² is 1e300, near the largest float (a cv below
#: about 7.5e-155 makes 1/cv² overflow to inf, or cv² underflow to 0).
MIN_GAMMA_CV = 1e-150


def synthetic_gamma(
    rate_per_s: float,
    duration_s: float,
    *,
    cv: float = 2.0,
    seed: int = 0,
    input_tokens: int = 1000,
    output_tokens: int = 250,
    lengths: Sequence[tuple[int, int]] | None = None,
) -> list[Request]:
    """Renewal process with gamma inter-arrival times: mean ``1/rate_per_s``, coefficient of variation ``cv``.

    ``cv = 1`` is a Poisson process; ``cv > 1`` is burstier. Shape k = 1/cv², scale = 1/(rate·k).
    """
    if rate_per_s <= 0 or not math.isfinite(rate_per_s):
        raise TraceError(f"synthetic trace: 'rate' must be > 0 requests/s, got {rate_per_s}")
    if duration_s <= 0 or not math.isfinite(duration_s):
        raise TraceError(f"synthetic trace: 'duration' must be > 0 s, got {duration_s}")
    expected = _expected_count(rate_per_s, duration_s)
    if expected > MAX_SYNTHETIC_REQUESTS:
        rate, duration = _factor(rate_per_s), _factor(duration_s)
        raise TraceError(
            f"synthetic trace: rate × duration = {rate} × {duration} = "
            f"{_figure(expected)} expected requests, more than the {MAX_SYNTHETIC_REQUESTS:,} a synthetic "
            "trace may be asked for (each is kept in memory); lower 'rate' or 'duration' so that their "
            "product is at most that"
        )
    if cv <= 0 or not math.isfinite(cv):
        raise TraceError(f"synthetic trace: 'cv' must be > 0, got {cv}")
    if cv < MIN_GAMMA_CV:
        # Trial 45 A4: cv=1e-200 made cv² 0.0 (ZeroDivisionError), cv=1e-160 made 1/cv² inf (a ValueError
        # in random.gammavariate), both tracebacks.
        raise TraceError(
            f"synthetic trace: 'cv' = {cv} is too small for a gamma distribution of inter-arrival times "
            f"(its shape 1/cv² overflows floating point); the smallest cv accepted is {MIN_GAMMA_CV:g} "
            "(any cv that small is a clock: every gap is 1/rate)"
        )
    rng = random.Random(seed)
    shape = 1.0 / (cv * cv)
    if shape == 0.0 or not math.isfinite(1.0 / (rate_per_s * shape)):
        # 1/cv² underflows (cv ≳ 1e154): random.gammavariate needs a shape > 0.
        raise TraceError(
            f"synthetic trace: 'cv' = {cv} is too large for a gamma distribution of inter-arrival "
            "times (its shape 1/cv² is 0 in floating point); lower 'cv' (cv = 1 is a Poisson process, "
            "cv > 1 is burstier)"
        )
    scale = 1.0 / (rate_per_s * shape)
    out: list[Request] = []
    t = 0.0
    while True:
        t += rng.gammavariate(shape, scale)
        if t >= duration_s:
            break
        if len(out) >= MAX_GENERATED_REQUESTS:
            # The cap above bounds the expected count, around which the generated count varies; a very
            # large cv makes most gaps 0.0 in floating point, so the generated count is bounded here too
            # (fresh-user trial 43 F1: cv=1e10 generated requests at t = 0 until memory ran out).
            raise TraceError(
                f"synthetic trace: cv = {cv} generated more than {MAX_GENERATED_REQUESTS:,} requests "
                f"(twice the cap on the expected count) before t = {duration_s:g} s: at this cv almost "
                "every gap between arrivals is 0 s; lower 'cv' (cv = 1 is a Poisson process, cv > 1 is "
                "burstier)"
            )
        i, o = _lengths(rng, lengths, input_tokens, output_tokens)
        out.append(Request(t, max(1, i), max(1, o)))
    return out


#: The length keys of a synthetic spec and why each is at least 1 token (fresh-user trial 43 F3:
#: ``isl=0`` was accepted, and the generator turned it into 1-token prompts without a word). The
#: readers of trace files keep clamping a 0 to 1 (:func:`_rebase`): a recorded request did run.
_LENGTH_KEYS = {
    "isl": "a request's prompt has at least one token (an empty prompt has no context phase to schedule)",
    "osl": "a request generates at least one token (its context phase emits the first)",
}


#: A number of a synthetic spec, as written: decimal digits with an optional sign, fraction and
#: exponent (``10``, ``0.5``, ``1e-3``). Python's ``float()`` also takes ``1_000``, ``inf``, ``nan``
#: and inner spaces trimmed (fresh-user trial 43 F4: ``rate=1_000`` ran as 1000); those are refused.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
#: What :data:`_NUMBER` takes, for messages.
NUMBER_SYNTAX = "decimal digits with an optional sign, fraction and exponent (10, 0.5, 1e-3)"
#: Keys whose value is a whole number (seeds and token counts); the others are real numbers.
_WHOLE_KEYS = frozenset({"seed", "isl", "osl"})


def _synthetic_value(where: str, key: str, value: str) -> float:
    """``value`` of ``key`` in a synthetic spec: a :data:`_NUMBER`, finite, and whole for the
    :data:`_WHOLE_KEYS`; else :class:`TraceError` starting with ``where`` (:func:`_where`) and naming
    the key, the value and what to write."""
    if not _NUMBER.fullmatch(value):
        raise TraceError(
            f"{where}: {key}={value!r} is not a number; write {NUMBER_SYNTAX}, without '_' or spaces"
        )
    number = float(value)
    if not math.isfinite(number):
        raise TraceError(f"{where}: {key}={value} is too large for a number (above 1.8e308)")
    if key in _WHOLE_KEYS and not number.is_integer():
        raise TraceError(f"{where}: {key}={value} is not a whole number; give an integer")
    return number


def _where(spec: str) -> str:
    """How every message about a trace starts: ``--trace 'SPEC'``, the flag and its value as typed
    (fresh-user trial 43 F5: a synthetic spec's errors began either ``synthetic trace '…'`` or
    ``--trace '…'``, the latter with a ``,seed=0`` the user had not typed)."""
    return f"--trace {spec!r}"


def _parse_synthetic(spec: str, lengths: Sequence[tuple[int, int]] | None, seed: int = 0) -> list[Request]:
    where = _where(spec)
    kind, _, rest = spec.partition(":")
    params: dict[str, float] = {}
    for part in filter(None, rest.split(",")):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise TraceError(f"{where}: expected key=value, got {part!r}")
        if key in params:  # fresh-user trial 43 F4: rate=1,rate=2 ran with the last one
            raise TraceError(f"{where}: {key!r} is given twice; give each key once")
        params[key] = _synthetic_value(where, key, value)
    known = {"rate", "duration", "cv", "seed", "isl", "osl"}
    unknown = sorted(set(params) - known)
    if unknown:
        raise TraceError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    if "rate" not in params or "duration" not in params:
        raise TraceError(f"{where}: 'rate' (requests/s) and 'duration' (s) are required")
    for key, why in _LENGTH_KEYS.items():
        if key in params and not params[key] >= 1:
            raise TraceError(f"{where}: {key}={params[key]:g}: {why}; use {key}=1 or more")
    rate, duration = params["rate"], params["duration"]
    try:
        requests = synthetic_gamma(
            rate,
            duration,
            cv=params.get("cv", 1.0 if kind == "poisson" else 2.0),
            seed=int(params.get("seed", seed)),
            input_tokens=int(params.get("isl", 1000)),
            output_tokens=int(params.get("osl", 250)),
            lengths=lengths,
        )
    except TraceError as exc:
        raise TraceError(f"{where}: {str(exc).removeprefix('synthetic trace: ')}") from None
    if not requests:  # fresh-user trial 43 F5: "has no requests", with no fix
        expected = _figure(_expected_count(rate, duration))
        raise_what = (
            f"'rate' ('duration' is above the {MAX_TRACE_SPAN_S:,} s a trace may span)"
            if duration > MAX_TRACE_SPAN_S
            else "'rate' or 'duration'"
        )
        raise TraceError(
            f"{where}: the draw holds no request (the first arrival falls after 'duration'; rate × "
            f"duration = {_factor(rate)} × {_factor(duration)} = {expected} expected requests); raise "
            f"{raise_what} so that their product is well above 1"
        )
    return requests


def _not_a_file(path: Path) -> str:
    """Why ``path`` (not a regular file) cannot be a trace, as ``stat`` sees it: "no such file", or what
    it is instead (fresh-user trial 40 F8: ``--trace /dev/null`` said "no such file")."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    )
    what = next((name for test, name in kinds if test(mode)), "something else")
    return f"not a regular file (it is {what})"


def load_trace(spec: str | Path, *, seed: int = 0) -> list[Request]:
    """Load a trace from a path (``.csv`` Azure, ``.jsonl``/``.json`` Mooncake) or a synthetic spec.

    Synthetic specs: ``poisson:rate=R,duration=S[,isl=N,osl=N,seed=N]`` and
    ``gamma:rate=R,duration=S,cv=C[,isl=N,osl=N,seed=N]`` (rate in requests/s, duration in s; isl and
    osl in tokens, at least 1): each key once, each value a number as :data:`NUMBER_SYNTAX` says
    (whole for seed, isl, osl), spaces around keys and values ignored. ``seed``: the generator's seed
    when the spec has no ``seed`` key.
    """
    text = str(spec)
    if text.startswith(("poisson:", "gamma:")):
        return _parse_synthetic(text, None, seed)
    if not text:  # Path("") is "." — a directory; the user gave no path at all (fresh-user trial 41)
        raise TraceError(
            f"{_where(text)}: the path is empty; give the path of an Azure .csv or a Mooncake .jsonl, "
            "or poisson:rate=R,duration=S / gamma:rate=R,duration=S,cv=C"
        )
    path = Path(text)
    if not path.is_file():
        raise TraceError(
            f"{_where(text)}: {_not_a_file(path)}; give an Azure .csv, a Mooncake .jsonl, "
            "or poisson:rate=R,duration=S / gamma:rate=R,duration=S,cv=C"
        )
    if path.stat().st_size == 0:
        raise TraceError(f"{_where(text)}: the file is empty (0 bytes); give a trace with requests in it")
    if path.suffix.lower() == ".csv":
        requests = read_azure_csv(path)
    elif path.suffix.lower() in {".jsonl", ".json"}:
        requests = read_mooncake_jsonl(path)
    else:
        raise TraceError(f"{_where(text)}: unknown format; use .csv (Azure) or .jsonl (Mooncake)")
    if not requests:
        raise TraceError(
            f"{_where(text)}: the file holds no request (a header or blank lines only); give a trace with "
            "at least one request in it"
        )
    return requests


def span_error(spec: str, requests: Sequence[Request], factor: float = 1.0) -> str | None:
    """Why ``requests`` (the trace ``spec``, its arrival times divided by ``factor``: ``--time-scale``)
    span too long to simulate — their last arrival after :data:`MAX_TRACE_SPAN_S` — naming the span,
    the cap and the fix; ``None`` when they do not."""
    span = max((r.arrival_s for r in requests), default=0.0)
    if span <= MAX_TRACE_SPAN_S:
        return None
    scaled = f" after --time-scale {factor:g}" if factor != 1 else ""
    shorter = "Lower 'duration'" if spec.startswith(("poisson:", "gamma:")) else "Cut the trace shorter"
    needed = factor * span / MAX_TRACE_SPAN_S
    digits = 10.0 ** (math.floor(math.log10(needed)) - 2)  # rounded up to 3 significant digits
    shown = f"{span:,.0f}" if span >= MAX_TRACE_SPAN_S + 1 else f"{span:,.3f}"  # never "86,400 > 86,400"
    return (
        f"{_where(spec)}: its last request arrives at {shown} s{scaled}, later than the "
        f"{MAX_TRACE_SPAN_S:,} s (one day) a simulated trace may span: a simulation's cost grows with the "
        "simulated time, requests or not (a metrics sample every second, a policy decision every 15 s). "
        f"{shorter}, or raise --time-scale to {math.ceil(needed / digits) * digits:g} or more"
    )


def time_scale(requests: Iterable[Request], factor: float) -> list[Request]:
    """Compress time by ``factor`` (>0): arrival times are divided by it, lengths are kept."""
    if factor <= 0:
        raise TraceError(f"--time-scale must be > 0, got {factor}")
    return [Request(r.arrival_s / factor, r.input_tokens, r.output_tokens) for r in requests]


def window(requests: Iterable[Request], start_s: float, end_s: float) -> list[Request]:
    """Requests arriving in ``[start_s, end_s)``, rebased so the window starts at 0 s."""
    return [
        Request(r.arrival_s - start_s, r.input_tokens, r.output_tokens)
        for r in requests
        if start_s <= r.arrival_s < end_s
    ]
