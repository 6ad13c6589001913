"""trtllm_operator.handlers.readiness: kopf's ToggleSet contract, kept; its wake-up herd, gone.

The contract tests are kopf's own (nolar/kopf 60d02aef, tests/primitives/test_togglesets.py, the
same code as kopf 1.45.2), run against kopf's class and ours, so ours answers as upstream does. The
``looptime`` fixture kopf's timing tests use is not installed here: those tests keep their outcome
(a timeout, a wake-up) without asserting the loop's clock.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from kopf._cogs.aiokits.aiotoggles import Toggle
from kopf._core.reactor import orchestration, processing, queueing, running

from trtllm_operator.handlers import readiness

#: kopf's own class (the base of ours; install() may already have replaced the module attribute).
KopfToggleSet: type[Any] = readiness.ToggleSet.__bases__[0]
CLASSES = [pytest.param(KopfToggleSet, id="kopf"), pytest.param(readiness.ToggleSet, id="ours")]
BOTH_FNS = [all, any]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- kopf's tests/primitives/test_togglesets.py, both classes --------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(("fn", "expected"), [(all, True), (any, False)])
def test_created_empty(cls: Any, fn: Callable[[Iterable[bool]], bool], expected: bool) -> None:
    async def body() -> None:
        toggleset = cls(fn)
        assert len(toggleset) == 0
        assert set(toggleset) == set()
        assert Toggle() not in toggleset
        assert toggleset.is_on() == expected
        assert toggleset.is_off() == (not expected)

    run(body())


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("fn", BOTH_FNS)
@pytest.mark.parametrize(("args", "state"), [((), False), ((False,), False), ((True,), True)])
def test_making_a_toggle(cls: Any, fn: Any, args: tuple[bool, ...], state: bool) -> None:
    async def body() -> None:
        toggleset = cls(fn)
        toggle = await toggleset.make_toggle(*args)
        assert len(toggleset) == 1
        assert set(toggleset) == {toggle}
        assert toggle in toggleset
        assert Toggle() not in toggleset
        assert toggleset.is_on() == state
        assert toggleset.is_off() == (not state)

    run(body())


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(("fn", "expected"), [(all, True), (any, False)])
@pytest.mark.parametrize("how", ["turned off then on", "turned on", "unexistent", "multiple"])
def test_dropping(cls: Any, fn: Any, expected: bool, how: str) -> None:
    async def body() -> None:
        toggleset = cls(fn)
        if how == "turned off then on":
            toggle = await toggleset.make_toggle(False)
            await toggle.turn_to(True)
            await toggleset.drop_toggle(toggle)
            gone = [toggle]
        elif how == "turned on":
            toggle = await toggleset.make_toggle(True)
            await toggleset.drop_toggle(toggle)
            gone = [toggle]
        elif how == "unexistent":
            toggle = Toggle()
            await toggleset.drop_toggle(toggle)
            gone = [toggle]
        else:
            gone = [await toggleset.make_toggle(True), Toggle()]
            await toggleset.drop_toggles(gone)
        assert len(toggleset) == 0
        assert set(toggleset) == set()
        assert all(t not in toggleset for t in gone)
        assert toggleset.is_on() == expected
        assert toggleset.is_off() == (not expected)

    run(body())


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("fn", BOTH_FNS)
def test_turning_a_toggle_turns_the_toggleset(cls: Any, fn: Any) -> None:
    async def body() -> None:
        toggleset = cls(fn)
        toggle = await toggleset.make_toggle(False)
        assert (toggleset.is_on(), toggleset.is_off()) == (False, True)
        await toggle.turn_to(True)
        assert (toggleset.is_on(), toggleset.is_off()) == (True, False)
        await toggle.turn_to(False)
        assert (toggleset.is_on(), toggleset.is_off()) == (False, True)

    run(body())


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(
    ("fn", "start", "turns", "states"),
    [
        (all, False, [True, True], [False, True]),  # all toggles must be on for all() to be on
        (all, True, [False, False], [False, False]),  # any toggle off makes all() off
        (any, False, [True, True], [True, True]),  # any toggle on makes any() on
        (any, True, [False, False], [True, False]),  # all toggles must be off for any() to be off
    ],
)
def test_two_toggles(cls: Any, fn: Any, start: bool, turns: list[bool], states: list[bool]) -> None:
    async def body() -> None:
        toggleset = cls(fn)
        toggles = [await toggleset.make_toggle(start), await toggleset.make_toggle(start)]
        assert toggleset.is_on() == start
        for toggle, turn, state in zip(toggles, turns, states, strict=True):
            await toggle.turn_to(turn)
            assert toggleset.is_on() == state
            assert toggleset.is_off() == (not state)

    run(body())


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("fn", BOTH_FNS)
@pytest.mark.parametrize("state", [True, False])
def test_waiting_fails_when_not_turned(cls: Any, fn: Any, state: bool) -> None:
    async def body() -> None:
        toggleset = cls(fn)
        await toggleset.make_toggle(not state)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(toggleset.wait_for(state), timeout=0.01)
        assert toggleset.is_on() == (not state)

    run(body())


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("fn", BOTH_FNS)
@pytest.mark.parametrize("state", [True, False])
def test_waiting_wakes_when_turned(cls: Any, fn: Any, state: bool) -> None:
    async def body() -> None:
        toggleset = cls(fn)
        toggle = await toggleset.make_toggle(not state)

        async def delayed_turning() -> None:
            await asyncio.sleep(0)
            await toggle.turn_to(state)

        task = asyncio.create_task(delayed_turning())
        await asyncio.wait_for(toggleset.wait_for(state), timeout=5)
        await task
        assert toggleset.is_on() == state

    run(body())


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("fn", BOTH_FNS)
def test_secures_against_usage_as_a_boolean(cls: Any, fn: Any) -> None:
    with pytest.raises(NotImplementedError):
        bool(cls(fn))


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("fn", BOTH_FNS)
@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        (None, "set()"),
        ({"val": False}, "{<Toggle: off>}"),
        ({"val": True}, "{<Toggle: on>}"),
        ({"val": False, "name": "xyz"}, "{<Toggle: xyz: off>}"),
        ({"val": True, "name": "xyz"}, "{<Toggle: xyz: on>}"),
    ],
)
def test_repr(cls: Any, fn: Any, kwargs: dict[str, Any] | None, text: str) -> None:
    async def body() -> None:
        toggleset = cls(fn)
        if kwargs is not None:
            await toggleset.make_toggle(kwargs["val"], name=kwargs.get("name"))
        assert repr(toggleset) == text

    run(body())


# --- what ours adds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_a_toggle_of_the_set_can_be_awaited_alone(cls: Any) -> None:
    """kopf waits on single toggles of the pause set too (peering): they share the set's condition."""

    async def body() -> None:
        toggleset = cls(any)
        toggle = await toggleset.make_toggle(False)
        waiter = asyncio.create_task(toggle.wait_for(True))
        await asyncio.sleep(0)
        await toggle.turn_to(True)
        await asyncio.wait_for(waiter, timeout=5)

    run(body())


def test_a_dropped_toggle_no_longer_counts() -> None:
    async def body() -> None:
        toggleset = readiness.ToggleSet(all)
        dropped = await toggleset.make_toggle(False)
        kept = await toggleset.make_toggle(True)
        await toggleset.drop_toggle(dropped)
        assert toggleset.is_on()
        await dropped.turn_to(True)
        await dropped.turn_to(False)
        assert toggleset.is_on()
        await kept.turn_to(False)
        assert toggleset.is_off()
        await toggleset.drop_toggles([kept, kept])
        assert toggleset.is_on()

    run(body())


def test_only_all_and_any() -> None:
    with pytest.raises(ValueError, match="all or any"):
        readiness.ToggleSet(lambda states: True)


def _readiness_wakeups(cls: Any, objects: int) -> int:
    """kopf's index-readiness pattern with ``objects`` objects: a toggle per object, then every
    object's worker indexes its object (here: yields to the loop once per object before it, so the
    workers finish one by one as they do at a restart), drops its own toggle and waits for all
    (processing.py ``process_resource_event``). Returns how many times the workers' readiness
    predicate was evaluated."""
    evaluations = 0

    class Counted(cls):  # type: ignore[misc, valid-type]
        def is_on(self) -> bool:
            nonlocal evaluations
            evaluations += 1
            return bool(super().is_on())

    async def body() -> None:
        toggleset = Counted(all)
        toggles = [await toggleset.make_toggle(name=str(i)) for i in range(objects)]

        async def worker(position: int, toggle: Toggle) -> None:
            for _ in range(position):
                await asyncio.sleep(0)
            await toggleset.drop_toggle(toggle)
            await toggleset.wait_for(True)

        workers = (worker(i, t) for i, t in enumerate(toggles))
        await asyncio.wait_for(asyncio.gather(*workers), timeout=60)

    run(body())
    return evaluations


def test_readiness_wakes_each_waiting_worker_once() -> None:
    """kopf's class evaluates the predicate for every waiter on every drop (quadratic: ≈ n²/2
    evaluations for n objects, each an O(n) scan); ours a few per object, each O(1): once per
    make and drop (to publish the aggregate), once per wait and once per wake-up."""
    objects = 200
    kopf_evaluations = _readiness_wakeups(KopfToggleSet, objects)
    our_evaluations = _readiness_wakeups(readiness.ToggleSet, objects)
    assert kopf_evaluations >= objects * objects // 4, kopf_evaluations
    assert our_evaluations <= 4 * objects, our_evaluations


def test_install_replaces_the_class_kopf_constructs() -> None:
    from kopf._cogs.aiokits import aiotoggles  # noqa: PLC0415

    readiness.install()
    readiness.install()  # idempotent
    assert aiotoggles.ToggleSet is readiness.ToggleSet
    assert readiness.ToggleSet.__bases__[0] is KopfToggleSet


def test_kopf_still_constructs_and_uses_the_sets_as_this_module_read_them() -> None:
    """A kopf upgrade that changes these lines must re-read readiness.py's upstream notes."""
    assert "operator_indexed=aiotoggles.ToggleSet(all)" in inspect.getsource(orchestration.orchestrator)
    assert "aiotoggles.ToggleSet(any)" in inspect.getsource(running.spawn_tasks)
    watcher = inspect.getsource(queueing.watcher)
    assert "operator_indexed.make_toggle(" in watcher
    assert "operator_indexed.is_on()" in watcher
    process = inspect.getsource(processing.process_resource_event)
    assert "await operator_indexed.drop_toggle(resource_indexed)" in process
    assert "await operator_indexed.wait_for(True)" in process
    upstream = {name for name, value in vars(KopfToggleSet).items() if inspect.isfunction(value)}
    assert upstream == {
        "__init__",
        "__repr__",
        "__len__",
        "__iter__",
        "__contains__",
        "__bool__",
        "is_on",
        "is_off",
        "wait_for",
        "make_toggle",
        "drop_toggle",
        "drop_toggles",
    }
