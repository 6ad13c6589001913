"""kopf's index-readiness gate without its wake-up herd: a drop-in ``ToggleSet`` for kopf 1.45.2.

**What kopf does** (kopf 1.45.2; the same code on nolar/kopf main at 60d02aef, 2026-06-03): while an
operator with index handlers starts, every object its first LIST returns gets a toggle in one
``ToggleSet(all)`` (``kopf/_core/reactor/queueing.py`` ``watcher``: ``operator_indexed.make_toggle``
per new object), and each object's worker, once it has indexed its object, drops its toggle and
waits until no toggle is left (``kopf/_core/reactor/processing.py`` ``process_resource_event``:
``drop_toggle``, then ``operator_indexed.wait_for(True)``). ``ToggleSet``
(``kopf/_cogs/aiokits/aiotoggles.py``) waits with one shared ``asyncio.Condition``: every
``make_toggle`` / ``drop_toggle`` calls ``notify_all()``, which wakes *every* waiting worker to
re-evaluate ``all(...)`` over *every* toggle. With N objects that is N wake-ups of up to N waiters,
each an O(N) scan: at 1,000 LLMEngines + 1,000 LLMDeployments (≈ 8,000 indexed objects with their
children and pods) an operator restart spent 134.5 s of 157.5 s there (py-spy: 42 % of the event
loop in ``Condition.notify_all``, 29 % in ``call_soon``; benchmarks/RESULTS.md, "Restart at
1,000 + 1,000: where the time goes").

**What this module changes**: :class:`ToggleSet` keeps kopf's contract (the same methods, the same
answers: kopf's own tests of ``ToggleSet``, tests/primitives/test_togglesets.py at 60d02aef, run
against both classes in tests/unit/test_kopf_readiness.py) but counts its "on" toggles, so
:meth:`ToggleSet.is_on` is O(1), and its waiters wait on one ``asyncio.Event`` per aggregate state,
set only when the aggregate state (all / any on) changes — a worker waiting for readiness wakes once
when the last toggle is dropped, not once per dropped toggle. The toggles it makes are kopf's
``Toggle`` (same ``asyncio.Condition``, so waiting on one toggle works as in kopf) and report their
own ``turn_to`` to the set.

:func:`install` puts the class where kopf's orchestrator and runner construct theirs (the module
attribute ``kopf._cogs.aiokits.aiotoggles.ToggleSet``, looked up at call time by
``kopf/_core/reactor/orchestration.py`` ``orchestrator`` — ``aiotoggles.ToggleSet(all)`` — and
``kopf/_core/reactor/running.py`` ``spawn_tasks`` — ``aiotoggles.ToggleSet(any)``, the pause set).
It refuses any kopf but the pinned one (operator/pyproject.toml), so an upgrade has to re-read the
upstream code above (tests/unit/test_kopf_readiness.py fails on a changed ``ToggleSet``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Callable, Iterable

from kopf._cogs.aiokits import aiotoggles

#: The kopf release whose ``ToggleSet`` this module replaces (operator/pyproject.toml pins it).
KOPF_VERSION = "1.45.2"


class Toggle(aiotoggles.Toggle):
    """kopf's ``Toggle`` that tells the :class:`ToggleSet` which made it when its state changes."""

    def __init__(
        self,
        state: bool,
        /,
        *,
        name: str | None,
        condition: asyncio.Condition,
        owner: ToggleSet,
    ) -> None:
        super().__init__(state, name=name, condition=condition)
        self._owner = owner

    async def turn_to(self, state: bool, /) -> None:
        """Turn the toggle on/off and wake the tasks waiting for it or for its set's aggregate."""
        async with self._condition:
            was = self._state
            self._state = bool(state)
            self._condition.notify_all()
            if was != self._state:
                self._owner._toggled(self)


class ToggleSet(aiotoggles.ToggleSet):
    """kopf's ``ToggleSet(all)`` / ``ToggleSet(any)`` with an O(1) state and a herd-free ``wait_for``.

    ``fn`` must be :func:`all` or :func:`any` (the only two kopf passes); anything else raises
    :class:`ValueError`. The state is kopf's: ``all`` is on when every toggle is on (or there is
    none), ``any`` when at least one is on.
    """

    def __init__(self, fn: Callable[[Iterable[bool]], bool]) -> None:
        if fn is not all and fn is not any:
            raise ValueError(f"ToggleSet counts toggles for all or any, not {fn!r}")
        super().__init__(fn)
        self._on = 0
        # One event per aggregate state; exactly one of them is set at any time.
        self._reached = {True: asyncio.Event(), False: asyncio.Event()}
        self._publish()

    def is_on(self) -> bool:
        if self._fn is all:
            return self._on == len(self._toggles)
        return self._on > 0

    async def wait_for(self, state: bool, /) -> None:
        """Return once the set's aggregate state is ``state`` (at once if it already is)."""
        state = bool(state)
        while self.is_on() != state:
            await self._reached[state].wait()

    async def make_toggle(self, val: bool = False, /, *, name: str | None = None) -> aiotoggles.Toggle:
        toggle = Toggle(val, name=name, condition=self._condition, owner=self)
        async with self._condition:
            self._toggles.add(toggle)
            self._on += toggle.is_on()
            self._condition.notify_all()
            self._publish()
        return toggle

    async def drop_toggle(self, toggle: aiotoggles.Toggle) -> None:
        await self.drop_toggles([toggle])

    async def drop_toggles(self, toggles: Iterable[aiotoggles.Toggle]) -> None:
        async with self._condition:
            for toggle in toggles:
                if toggle in self._toggles:
                    self._toggles.discard(toggle)
                    self._on -= toggle.is_on()
            self._condition.notify_all()
            self._publish()

    def _toggled(self, toggle: Toggle) -> None:
        """A member toggle changed its state (called by :meth:`Toggle.turn_to`)."""
        if toggle in self._toggles:
            self._on += 1 if toggle.is_on() else -1
            self._publish()

    def _publish(self) -> None:
        state = self.is_on()
        self._reached[state].set()
        self._reached[not state].clear()


def install() -> None:
    """Make kopf construct :class:`ToggleSet` instead of its own (idempotent; before ``kopf.run``).

    Raises :class:`RuntimeError` when the installed kopf is not :data:`KOPF_VERSION`."""
    installed = importlib.metadata.version("kopf")
    if installed != KOPF_VERSION:
        raise RuntimeError(
            f"trtllm_operator.handlers.readiness replaces kopf {KOPF_VERSION}'s ToggleSet, but kopf "
            f"{installed} is installed: re-read kopf's aiotoggles/queueing/processing and update it"
        )
    aiotoggles.ToggleSet = ToggleSet  # type: ignore[misc]
