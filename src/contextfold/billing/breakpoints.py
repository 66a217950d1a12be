"""Where a request to a breakpoint cache (Anthropic) puts its ``cache_control`` marks: :func:`breakpoint_indices`.

Anthropic caches only the prefixes a request marks (at most 4 marks), and a lookup walks back at most 20 content
blocks from each mark to find an entry an earlier request made. contextfold's view has three prefixes worth an
entry, and its Anthropic client marks them (``contextfold.integrations.anthropic_client``); the replay bills the
same marks (``Block.breakpoint``, ``PromptCache(breakpoints="marked")``):

- the pinned head (tools, system prompt: the Messages API renders tools first, so a mark on the system prompt's last
  block caches both): it survives every rewrite of the history;
- what the next masking batch keeps: the last message before the turn of the first tool output a batch can still
  take (after the latest summary and its receipt, when there is one; the summary's receipt when that turn follows
  it). A masking batch changes only outputs not masked yet (and, with ``clear_tool_inputs``, their calls), and
  never those the caller says it will never take (``settled``: the manager's, from its policy: outputs no larger
  than their placeholder, excluded and never-masked tools, protected or non-text results), so with this mark the
  head, the summary, the outputs masked before and the settled ones are read, not written again, after a masking
  (the 20-block lookback from the last mark would not reach back to them). lm32b @ 16K at Claude Sonnet 4's rates:
  0.737 -> 0.723 of the unmanaged history's bill with the mark on the summary alone (views unchanged);
- in the request a masking batch rewrote, a bridge: the last message before the batch's turn, where the previous
  request's mark above was. A batch of more than 20 blocks puts that entry out of reach of this request's marks
  (the one above moved past the batch), and the request would write everything after the pinned head; the bridge
  reads it. It takes the anchor's place (below): in that request the last mark finds nothing anyway. Going past the
  settled outputs without the bridge made lm32b's bill worse (0.723 -> 0.733: after a batch, the new mark was out
  of reach of the old one); with it 0.7225, tau @ 4K 0.981 -> 0.979;
- the last message of the history: the whole request is read by the next one. The budget line
  (``policy.context_status``), sent last, changes every call: the mark goes on the message before it, so the line
  costs its own tokens and nothing more;
- an anchor about :data:`ANCHOR_BLOCKS` content blocks before the last mark: a turn that adds more than 20 blocks
  (a dozen parallel tool calls and their results) puts the previous request's entry out of the last mark's reach,
  and the request would write everything after the pinned head again; from the anchor it is in reach for up to
  ~35 blocks of growth. Its prefix is part of what the last mark writes anyway: it costs nothing.

A mark that would repeat another (a view that is only a head, a summary that is the last message) is not made
twice, so a request carries at most 4, Anthropic's limit (a caller's own marks switch contextfold's off).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from ..messages import DocumentPart, ImagePart, Message, TextPart, UnknownPart

__all__ = ["ANCHOR_BLOCKS", "EPHEMERAL", "breakpoint_indices", "carries_marks", "mark_breakpoints", "without_marks"]

_HEAD_ROLES = ("system", "developer")
# Anthropic's lookup walks back at most 20 blocks from a mark (billing.rates.ANTHROPIC_LOOKBACK_BLOCKS): the anchor
# sits well inside that from the last mark, so the two reaches overlap.
ANCHOR_BLOCKS = 15
_STATUS_KIND = "context_status"  # steering.notes.STATUS_KIND (billing does not import steering)
_STABLE_KINDS = ("summary", "receipt")
_MASKED_KIND = "masked"  # cache.masking's placeholders


def breakpoint_indices(messages: Sequence[Message], *, settled: Collection[int] = (),
                       bridge: int | None = None) -> list[int]:
    """The indices of ``messages`` whose last block a request marks, ascending (see the module).

    ``settled``: indices of tool results no masking batch will ever change (besides those masked already).
    ``bridge``: in the request a masking batch rewrote, the last message before the batch's first change (the
    previous request's second mark was there, or before it): marked instead of the anchor (see the module).
    """
    marks: list[int] = []
    head = 0
    while head < len(messages) and messages[head].role in _HEAD_ROLES:
        head += 1
    if head:
        marks.append(head - 1)
    last = len(messages) - 1
    while last >= head and messages[last].kind == _STATUS_KIND:
        last -= 1
    stable = next((i for i in range(last, head - 1, -1) if messages[i].kind in _STABLE_KINDS), None)
    if stable is not None:
        # The receipt follows its summary: the mark goes after both.
        while stable + 1 <= last and messages[stable + 1].kind in _STABLE_KINDS:
            stable += 1
    frontier = _masking_frontier(messages, last, after=head - 1 if stable is None else stable, settled=settled)
    kept = frontier if frontier is not None else stable
    before = marks[-1] if marks else head - 1
    bridged = bridge is not None and before < bridge < last and (kept is None or bridge < kept)
    if bridged:
        assert bridge is not None
        marks.append(bridge)
    if kept is not None and (kept != last or stable == last):
        marks.append(kept)  # at the last message only for a summary there: the last mark covers a frontier there
    if last >= head and (not marks or marks[-1] != last):
        # After a masking batch the last mark finds nothing of the previous request anyway: the bridge replaces
        # the anchor (a request carries at most 4 marks).
        anchor = None if bridged else _anchor(messages, last, after=marks[-1] if marks else head - 1)
        if anchor is not None:
            marks.append(anchor)
        marks.append(last)
    return marks


def _masking_frontier(messages: Sequence[Message], last: int, *, after: int,
                      settled: Collection[int] = ()) -> int | None:
    """The last message before the turn whose tool output is the first one after ``after`` a batch can take.

    A masking batch changes only outputs not masked yet and not ``settled`` (and, with ``clear_tool_inputs``, the
    calls that made them), so the prefix up to here survives it. None when that is not after ``after`` (the pinned
    head, or the summary: its mark is as good); ``last`` when no output is left to take (a batch can only take
    outputs added later).
    """
    for i in range(after + 1, last + 1):
        m = messages[i]
        if m.role != "tool" or m.kind == _MASKED_KIND or i in settled:
            continue
        turn = next((j for j in range(i - 1, after, -1) if messages[j].role == "assistant"
                     and any(c.id == m.tool_call_id for c in messages[j].tool_calls)), i)
        return turn - 1 if turn - 1 > after else None
    return last


def _anchor(messages: Sequence[Message], last: int, *, after: int) -> int | None:
    """The last message ending at least ``ANCHOR_BLOCKS`` content blocks before ``messages[last]`` ends.

    None when that message is not after the mark at ``after``.
    """
    walked = 0
    for i in range(last, after, -1):
        if walked >= ANCHOR_BLOCKS:
            return i
        walked += _parts(messages[i])
    return None


def _parts(message: Message) -> int:
    """Content blocks of a message on Anthropic's wire (as ``blocks_of`` counts them)."""
    content = message.content
    return max(1, (len(content) if isinstance(content, tuple) else int(bool(content))) + len(message.tool_calls))


EPHEMERAL: Mapping[str, Any] = MappingProxyType({"type": "ephemeral"})
# Parts a cache_control may sit on (Anthropic refuses it on thinking blocks). Not a block contextfold does not model
# (UnknownPart): the codec sends it back exactly as it came, so a mark set on the part would never reach the wire.
_MARKABLE = (TextPart, ImagePart, DocumentPart)


def carries_marks(messages: Sequence[Message]) -> bool:
    """Whether any message already carries a ``cache_control`` (the caller's own breakpoints: left as they are)."""
    for m in messages:
        if "cache_control" in m.extra or any("cache_control" in c.extra for c in m.tool_calls):
            return True
        if isinstance(m.content, tuple) and any(_part_marked(p) for p in m.content):
            return True
    return False


def without_marks(message: Message) -> Message:
    """``message`` without a caller's ``cache_control`` marks (on its parts, its tool calls, a tool result).

    A mark says where a request wants a cache entry; a client moves it every turn, so a history that keeps the
    marks it was fed with piles them up past Anthropic's limit (the proxy stores messages without them).
    """
    if not carries_marks((message,)):
        return message
    content = message.content
    if isinstance(content, tuple):
        content = tuple(_part_unmarked(p) for p in content)
    calls = tuple(replace(c, extra=_extra_unmarked(c.extra)) if "cache_control" in c.extra else c
                  for c in message.tool_calls)
    return replace(message, content=content, tool_calls=calls, extra=_extra_unmarked(message.extra))


def _extra_unmarked(extra: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType({k: v for k, v in extra.items() if k != "cache_control"})


def _part_unmarked(part: Any) -> Any:
    if isinstance(part, UnknownPart):
        if isinstance(part.data, Mapping) and "cache_control" in part.data:
            return replace(part, data={k: v for k, v in part.data.items() if k != "cache_control"})
        return part
    return replace(part, cache_control=None) if getattr(part, "cache_control", None) is not None else part


def _part_marked(part: Any) -> bool:
    # A block contextfold does not model keeps the caller's mark in its raw data.
    if isinstance(part, UnknownPart):
        return isinstance(part.data, Mapping) and "cache_control" in part.data
    return getattr(part, "cache_control", None) is not None


def mark_breakpoints(messages: Sequence[Message], control: Mapping[str, Any] = EPHEMERAL, *,
                     settled: Collection[int] = (), bridge: int | None = None) -> list[Message]:
    """``messages`` with ``control`` on the last block of each message :func:`breakpoint_indices` names.

    The copies are for the wire only (the history keeps its messages): a tool result carries the mark on its
    ``tool_result`` block, an assistant turn with tool calls on its last ``tool_use``, text on its last markable
    part (a plain string becomes one text part). A message with nothing markable (thinking only) gets none.
    """
    out = list(messages)
    for i in breakpoint_indices(messages, settled=settled, bridge=bridge):
        out[i] = _marked(messages[i], control)
    return out


def _marked(message: Message, control: Mapping[str, Any]) -> Message:
    if message.role == "tool":
        return replace(message, extra=_with_control(message.extra, control))
    if message.tool_calls and message.role == "assistant":
        last = message.tool_calls[-1]
        calls = (*message.tool_calls[:-1], replace(last, extra=_with_control(last.extra, control)))
        return replace(message, tool_calls=calls)
    if isinstance(message.content, str):
        return replace(message, content=(TextPart(message.content, cache_control=control),)) if message.content \
            else message
    parts = list(message.content)
    for j in range(len(parts) - 1, -1, -1):
        part = parts[j]
        if isinstance(part, _MARKABLE) and not (isinstance(part, TextPart) and not part.text):
            parts[j] = replace(part, cache_control=control)
            return replace(message, content=tuple(parts))
    return message


def _with_control(extra: Mapping[str, Any], control: Mapping[str, Any]) -> Mapping[str, Any]:
    # Extras another format decoded are not sent to Anthropic (formats._common.split_extra): only the mark goes.
    wire = extra.get("_wire")
    kept = dict(extra) if not isinstance(wire, Mapping) or wire.get("format") == "anthropic" else {}
    return MappingProxyType({**kept, "cache_control": dict(control)})
