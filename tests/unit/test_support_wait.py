"""tests/support/wait.py: returns the first truthy value, retries on exceptions but not on failed
assertions, fails with context; ``wait_settled`` returns what has stopped changing, not the first
reading."""

from __future__ import annotations

import itertools

import pytest
from support.wait import wait_for, wait_settled


def test_returns_first_truthy_value() -> None:
    values = iter([None, 0, "", {"ready": True}])
    assert wait_for(lambda: next(values), timeout=5, interval=0) == {"ready": True}


def test_exceptions_count_as_not_yet() -> None:
    calls = itertools.count()

    def flaky() -> str:
        if next(calls) < 2:
            raise KeyError("not there yet")
        return "ok"

    assert wait_for(flaky, timeout=5, interval=0) == "ok"


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda: [], "last value: []"),
        (lambda: {}["missing"], "last exception: KeyError('missing')"),
    ],
)
def test_timeout_names_what_and_last_outcome(fn, expected: str) -> None:
    with pytest.raises(AssertionError) as info:
        wait_for(fn, timeout=0.05, interval=0.01, desc="the widget")
    assert "the widget" in str(info.value)
    assert expected in str(info.value)


def test_a_failed_assertion_fails_at_once_not_as_a_timeout() -> None:
    calls = itertools.count()

    def check() -> bool:
        next(calls)
        raise AssertionError("replicas 3 != 2")

    with pytest.raises(AssertionError, match="replicas 3 != 2") as info:
        wait_for(check, timeout=30, interval=0.01, desc="the widget")
    assert "timed out" not in str(info.value)
    assert next(calls) == 1  # called once: no retry


def test_settled_counts_what_arrives_after_the_first_reading() -> None:
    """Two Events a moment apart: a wait for the first one would count one; the quiet window sees
    both."""
    readings = iter([[], ["warning"], ["warning"], ["warning", "duplicate"]])

    def events() -> list[str]:
        return next(readings, ["warning", "duplicate"])

    assert wait_settled(events, quiet=0.05, timeout=5, interval=0.01) == ["warning", "duplicate"]


def test_settled_compares_by_key() -> None:
    """Readings equal by ``key`` (here: length) do not restart the window; the last one is returned."""
    counter = itertools.count()
    got = wait_settled(lambda: [next(counter)], quiet=0.05, timeout=5, interval=0.01, key=len)
    assert len(got) == 1 and got[0] >= 1


def test_settled_times_out_while_it_keeps_changing() -> None:
    counter = itertools.count(1)
    with pytest.raises(AssertionError, match=r"the widget to stay unchanged for 0\.1 s"):
        wait_settled(lambda: next(counter), quiet=0.1, timeout=0.3, interval=0.01, desc="the widget")
