"""The update a LangGraph subgraph agent hands its parent so that the parent's messages become the manager's view.

A subgraph's final messages reach the parent through the parent's ``add_messages`` reducer, which only merges by
id: a message with a known id replaces it in place, an unknown one is appended, and ``RemoveMessage(id)`` removes
one, raising when the parent has no such id. Nothing else the subgraph returns can take a message out.

So the update is built from those three moves alone, each used only where it is safe whoever called the agent:

- a kept message (same id) replaces the parent's copy in place (a masked output's new text, say);
- a message the manager made (a summary) takes the id of a message it replaced, the first dropped one in its
  place, so it lands where that message stood instead of at the end; a replacement never raises, and where the
  parent never had that id it is simply appended;
- a dropped message is removed only when the caller held it already at the end of the previous run (``held``) and
  passed it in again: the caller keeps it, so the parent has it. A message of this run, or one the caller passed in
  for the first time, is never named in a removal: a user's node function that called the agent with messages of
  its own and returns its result could otherwise make the parent raise. Such a message is left out of the
  update: the parent either never had it (a run's own message) or keeps it one run longer.

``parent_after`` is what a parent that gave the run its input holds once it applies the update: the next run's
input, which the adapter records as the framework's history so the next run continues without a rebuild.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..errors import MissingExtra

try:
    from langchain_core.messages import BaseMessage, RemoveMessage
    from langgraph.graph.message import add_messages
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the LangChain middleware", "langchain", module="langgraph") from exc

__all__ = ["ParentUpdate", "parent_update"]


@dataclass(frozen=True, slots=True)
class ParentUpdate:
    """The messages a subgraph agent's final state holds for its parent, and what the parent holds after them."""

    messages: list[BaseMessage]  # removals first, then the view (made messages re-identified where placed)
    parent_after: list[BaseMessage]
    placed: dict[int, BaseMessage]  # view index -> the re-identified message that replaces the view's one


def parent_update(run_input: Sequence[BaseMessage], state: Sequence[BaseMessage], view: Sequence[BaseMessage],
                  held: Collection[str]) -> ParentUpdate | None:
    """The update that turns a parent holding ``run_input`` into ``view``, as far as it can be done safely.

    Args:
        run_input: The messages the run started with (what the caller passed in), in order.
        state: The run's final messages (``run_input`` then what the run added), in order, every one with an id.
        view: The manager's view of ``state`` (without the pinned system prompt), in order.
        held: Ids of the messages the caller held at the end of the previous run (see the module's docstring).

    Returns:
        None when the view is the state itself (nothing to hand back but the state), or when a message the manager
        made has no dropped message to stand in for and cannot be appended in its place (then the parent keeps
        every message, as it would without the update).
    """
    if len(view) == len(state) and all(a is b for a, b in zip(view, state, strict=True)):
        return None
    position = {m.id: i for i, m in enumerate(state)}
    in_view = {m.id for m in view}
    dropped = [i for i, m in enumerate(state) if m.id not in in_view]
    next_kept = [len(state)] * (len(view) + 1)  # per view index: the state index of the next kept message
    for j in range(len(view) - 1, -1, -1):
        kept = position.get(view[j].id)
        next_kept[j] = kept if kept is not None else next_kept[j + 1]
    given = {m.id for m in run_input}
    placed: dict[int, BaseMessage] = {}
    used: set[int] = set()
    last_kept = -1
    for j, message in enumerate(view):
        kept = position.get(message.id)
        if kept is not None:
            last_kept = kept
            continue
        upper = next_kept[j + 1]
        slot = next((i for i in dropped if last_kept < i < upper and i not in used), None)
        if slot is not None:
            used.add(slot)
            placed[j] = message.model_copy(update={"id": state[slot].id})
        elif upper < len(state) and state[upper].id in given:
            return None  # appended, it would land after a message the parent holds and the view puts after it
    removals: list[BaseMessage] = [RemoveMessage(id=str(state[i].id)) for i in dropped
                                   if i not in used and state[i].id in given and state[i].id in held]
    messages = [*removals, *(placed.get(j, m) for j, m in enumerate(view))]
    parent_after: list[BaseMessage] = add_messages(list(run_input), list(messages))  # type: ignore[arg-type,assignment]
    return ParentUpdate(messages, parent_after, placed)
