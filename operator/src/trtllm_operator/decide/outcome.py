"""What one reconcile decided — the one result type of every controller's decision. Pure data.

Both controllers reconcile in the same shape, **observe → decide → act → write**: the handler reads
the world into an observation, a pure function in ``decide/`` returns an :class:`Outcome`, the
handler performs ``actions`` (creating or adopting children) and then writes ``status`` and
``conditions`` through the shared optimistic-concurrency status writer
(:func:`trtllm_operator.kube.status.update_conditions`) and posts ``events``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from trtllm_operator.decide.conditions import Condition

ActionT = TypeVar("ActionT")


def retry_note(kind: str, seconds: float) -> str:
    """When a refusal that waits on another object (a Secret's label, a conflicting child) is looked
    at again: a reconcile of the ``kind`` object runs on its next change and at the latest when its
    controller's drift loop comes round, every ``seconds`` (the caller passes the interval that loop
    really uses)."""
    return f"tried again on the next change of this {kind} or within {seconds:g} s"


@dataclass(frozen=True)
class EventToPost:
    """A Kubernetes Event to post on the reconciled object (``type`` Normal or Warning)."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass
class Outcome(Generic[ActionT]):
    """The result of one decision.

    ``status``: a JSON merge patch for the object's ``status`` (``None`` deletes a key), including
    ``phase``; ``conditions``: merged by type into ``status.conditions`` (other writers' types are
    kept); ``actions``: what the handler must do before writing (controller-specific types);
    ``event``: the Event to post, if the decision is news; ``events``: further Events (condition
    transitions).
    """

    status: dict[str, Any]
    conditions: list[Condition]
    actions: list[ActionT] = field(default_factory=list)
    event: EventToPost | None = None
    events: list[EventToPost] = field(default_factory=list)

    @property
    def phase(self) -> str:
        """``status.phase``."""
        return str(self.status.get("phase"))

    def all_events(self) -> list[EventToPost]:
        """``event`` (when set) followed by ``events``."""
        return ([self.event] if self.event is not None else []) + list(self.events)
