"""The update a LangGraph subgraph agent hands its parent so that the parent's messages become the manager's view.

A subgraph's final messages reach the parent through the parent's ``add_messages`` reducer, which only merges by
id: a message with a known id replaces it in place, an unknown one is appended, and ``RemoveMessage(id)`` removes
one, raising when the parent has no such id. Nothing else the subgraph returns can take a message out.

So the update is built from those three moves alone, each used only where it is safe whoever called the agent:

- a kept message (same id) replaces the parent's copy in place (a masked output's new text, say);
- a message the manager made (a summary) takes the id of a message it replaced, the first dropped one in its
  place, so it lands where that message stood instead of at the end; a replacement never raises, and where the
  parent never had that id it is simply appended. Where no dropped message is left before the next kept one the
  parent holds (a summary put before the first message the compaction kept), that kept message moves one on: the
  summary takes its id and it takes the next slot (or a new id at the end), so the view's order holds;
- a dropped message is removed only when the caller held it already at the end of the previous run (``held``) and
  passed it in again: the caller keeps it, so the parent has it. A message of this run, or one the caller passed in
  for the first time, is never named in a removal: a user's node function that called the agent with messages of
  its own and returns its result could otherwise make the parent raise. Such a message is left out of the
  update: the parent either never had it (a run's own message) or keeps it one run longer. Each removal follows
  an empty stand-in under the same id, so that a parent whose ``messages`` key has no reducer (it takes the list
  as it is, removals included) gives its next run an input the agent's own ``add_messages`` can reduce.

``parent_after`` is what a parent that gave the run its input holds once it applies the update: the next run's
input, which the adapter records as the framework's history so the next run continues without a rebuild.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..errors import MissingExtra

try:
    from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage
    from langgraph.graph.message import add_messages
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the LangChain middleware", "langchain", module="langgraph") from exc

__all__ = ["ParentUpdate", "parent_update"]


@dataclass(frozen=True, slots=True)
class ParentUpdate:
    """The messages a subgraph agent's final state holds for its parent, and what the parent holds after them."""

    messages: list[BaseMessage]  # removals first (each after its stand-in), then the view (re-identified where placed)
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
        None when the view is the state itself (nothing to hand back but the state).
    """
    if len(view) == len(state) and all(a is b for a, b in zip(view, state, strict=True)):
        return None
    given = {m.id for m in run_input}
    position = {m.id: i for i, m in enumerate(state)}
    slot: list[int | None] = [position.get(m.id) for m in view]  # whose id each view message takes; None: appended
    placed: dict[int, BaseMessage] = {}
    cursor = -1  # the last slot taken: the view's messages take slots in the state's order
    for j, message in enumerate(view):
        kept = slot[j]
        if kept is not None:
            cursor = kept
            continue
        later = next((k for k in range(j + 1, len(view)) if slot[k] is not None), None)
        upper = len(state) if later is None else slot[later]
        assert upper is not None
        if cursor + 1 == upper < len(state) and state[upper].id in given:
            # No slot left before a message the parent holds: it moves one on, and its slot is taken here.
            assert later is not None
            slot[later] = None
            upper += 1
        if cursor + 1 < upper:
            cursor += 1
            slot[j] = cursor
            placed[j] = message.model_copy(update={"id": state[cursor].id})
        elif message.id in position:  # a moved message with no slot left: a new id of its own, at the end
            placed[j] = message.model_copy(update={"id": str(uuid.uuid4())})
    used = {i for i in slot if i is not None}
    dropped = [i for i in range(len(state)) if i not in used]
    # Each removal follows an empty stand-in of the message it removes: a parent whose messages key has no reducer
    # takes the list as it is, and its next run's input (reduced by the agent's add_messages from nothing) has the
    # stand-in to remove; add_messages replaces the parent's message with it and removes it in the same update.
    removals: list[BaseMessage] = []
    for i in dropped:
        if state[i].id in given and state[i].id in held:
            removals += [HumanMessage(content="", id=state[i].id), RemoveMessage(id=str(state[i].id))]
    messages = [*removals, *(placed.get(j, m) for j, m in enumerate(view))]
    parent_after: list[BaseMessage] = add_messages(list(run_input), list(messages))  # type: ignore[arg-type,assignment]
    return ParentUpdate(messages, parent_after, placed)
