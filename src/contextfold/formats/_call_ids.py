"""Tool call ids as each API takes them: a recorded id of another provider may be one it refuses.

Anthropic takes a ``tool_use`` id only of letters, digits, ``_`` and ``-`` (``tool_use.id: String should match
pattern '^[a-zA-Z0-9_-]+$'``); OpenAI's Chat Completions takes ids of at most 40 characters and the Responses API
``call_id`` values of at most 64 (``string too long``). Ids written by other servers break them: ``functions.bash:0``
(Kimi-style), a 46-character gateway id, an MCP server's ``server.tool/1``. A history holding one was encoded as it
was, and the provider refused the whole request with a 400.

An id the API would refuse is sent as its allowed characters, cut to fit, followed by ``_`` and a hash of the whole
id: the same id gives the same wire id in every request (the prompt cache's prefix stays the same), a call and its
result keep their pairing, and two ids that differ only in refused characters stay apart. An id that fits is sent
as it is, so histories of the API's own ids are unchanged. The validators refuse what the API refuses, naming the
field.

The hash is public, so a history (an imported file: untrusted) may also hold, as an id that fits, the very id a
rewrite gives (``a.b`` and ``a_b_<hash of a.b>``), or two refused ids whose rewrites meet: two calls would then share
one wire id and their results could no longer be told apart. :func:`history_call_ids` names a whole history's ids:
the ids that fit are taken first, a rewrite landing on a taken id is hashed again with a counter. Still
deterministic (the same history, the same wire ids); only such a history's rewrite can change when a later message
brings the id it landed on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..errors import InvalidHistory
from ..messages import Message

__all__ = ["ANTHROPIC_FITS", "ANTHROPIC_IDS", "CHAT_IDS", "RESPONSES_IDS", "CallIdRule", "UniqueCallIds",
           "anthropic_call_id",
           "chat_call_id",
           "check_call_id", "history_call_ids", "rename_refused", "responses_call_id", "wire_call_id"]

# Bytes of the hash that keeps two rewritten ids apart: 48 bits, no collision among the ids of any one history.
_HASH_BYTES = 6


@dataclass(frozen=True, slots=True)
class CallIdRule:
    """What one API takes as a tool call id: a most length, and characters it refuses (a pattern of one of them)."""

    max_chars: int | None
    refused: re.Pattern[str] | None
    spelled: str  # what the API takes, for error messages

    def fits(self, call_id: str) -> bool:
        """Whether the API takes ``call_id`` as it is."""
        if self.max_chars is not None and len(call_id) > self.max_chars:
            return False
        return self.refused is None or self.refused.search(call_id) is None


ANTHROPIC_IDS = CallIdRule(None, re.compile(r"[^A-Za-z0-9_-]"), "only letters, digits, '_' and '-'")
CHAT_IDS = CallIdRule(40, None, "at most 40 characters")
RESPONSES_IDS = CallIdRule(64, None, "at most 64 characters")


def wire_call_id(call_id: str, rule: CallIdRule, *, attempt: int = 0) -> str:
    """``call_id`` as the API of ``rule`` takes it: itself when it fits, else its allowed part and a hash of it.

    ``attempt`` > 0 hashes it with that counter: the rewrite that :func:`history_call_ids` takes when the first
    landed on an id of the history.
    """
    if rule.fits(call_id):
        return call_id
    hashed = call_id.encode("utf-8", "surrogatepass") + (b"\x00%d" % attempt if attempt else b"")
    suffix = "_" + hashlib.blake2b(hashed, digest_size=_HASH_BYTES).hexdigest()
    kept = rule.refused.sub("_", call_id) if rule.refused is not None else call_id
    if rule.max_chars is not None:
        kept = kept[: rule.max_chars - len(suffix)]
    return kept + suffix


# The encoders' own spellings: one test, inline, for the ids that fit (nearly all): encoding is on every new message.
_ANTHROPIC_FITS = ANTHROPIC_FITS = re.compile(r"[A-Za-z0-9_-]+").fullmatch
_CHAT_MAX = 40
_RESPONSES_MAX = 64


def anthropic_call_id(call_id: str) -> str:
    """:func:`wire_call_id` for Anthropic."""
    return call_id if _ANTHROPIC_FITS(call_id) else wire_call_id(call_id, ANTHROPIC_IDS)


def chat_call_id(call_id: str) -> str:
    """:func:`wire_call_id` for Chat Completions."""
    return call_id if len(call_id) <= _CHAT_MAX else wire_call_id(call_id, CHAT_IDS)


def responses_call_id(call_id: str) -> str:
    """:func:`wire_call_id` for the Responses API."""
    return call_id if len(call_id) <= _RESPONSES_MAX else wire_call_id(call_id, RESPONSES_IDS)


def history_call_ids(messages: Sequence[Message], rule: CallIdRule,
                     one: Callable[[str], str]) -> Callable[[str], str]:
    """The wire id of each tool call id of ``messages`` (calls and results): ``one`` unless a rewrite meets an id.

    ``one`` is the format's own :func:`wire_call_id` (e.g. :func:`anthropic_call_id`), which gives an id that fits
    back as the same object. The ids that fit keep themselves; the refused ones, in sorted order (not the history's:
    the same set of ids, the same names), take their rewrite, or the next counter's when it is taken. The history is
    looked through only when a refused id is met: nearly every history has none, and is encoded at every turn.
    """
    renamed: dict[str, str] = {}

    def rename(call_id: str) -> str:
        if not renamed:
            renamed.update(_rename_refused(messages, rule, one))
        return renamed[call_id]

    # The test for an id that fits is inline (no call of ``one``): encoding names every id of every message at
    # every turn (F1 made a 1,000-message Chat encode 0.40 -> 0.47 ms by calling through).
    limit = rule.max_chars
    if rule.refused is None and limit is not None:
        def named_by_length(call_id: str) -> str:
            return call_id if len(call_id) <= limit else rename(call_id)

        return named_by_length
    if one is anthropic_call_id:
        def named_by_pattern(call_id: str) -> str:
            return call_id if _ANTHROPIC_FITS(call_id) else rename(call_id)

        return named_by_pattern

    def named(call_id: str) -> str:
        wire = one(call_id)
        return wire if wire is call_id else rename(call_id)

    return named


def _rename_refused(messages: Sequence[Message], rule: CallIdRule, one: Callable[[str], str]) -> dict[str, str]:
    return rename_refused(_message_ids(messages), rule, one)


def rename_refused(call_ids: Iterable[str], rule: CallIdRule, one: Callable[[str], str]) -> dict[str, str]:
    """The wire id of each id of ``call_ids`` that ``rule`` refuses (those that fit keep themselves: not listed).

    The rewrite of :func:`history_call_ids`, for ids read off another format's items (a Chat view sent on to
    Anthropic by a gateway): refused ids in sorted order take their rewrite, or the next counter's when it is taken.
    """
    fitting: set[str] = set()
    refused: set[str] = set()
    for call_id in call_ids:
        (fitting if one(call_id) is call_id else refused).add(call_id)
    taken = set(fitting)
    renamed: dict[str, str] = {}
    for call_id in sorted(refused):
        attempt = 0
        wire = one(call_id)
        while wire in taken:
            attempt += 1
            wire = wire_call_id(call_id, rule, attempt=attempt)
        taken.add(wire)
        renamed[call_id] = wire
    return renamed


class UniqueCallIds:
    """Wire ids for one request in which no two calls share an id, for an API that refuses a repeated one.

    Anthropic refuses a request in which a ``tool_use`` id appears twice (``tool_use ids must be unique``), anywhere
    in it; OpenAI's APIs take an id used again in a later turn, and agents recorded on them do so (49 of the 200
    tau-bench airline sessions: gpt-4o's ids come back). The request is named as a stream, in its order: a call whose
    wire id was already sent is sent as ``<wire id>_2`` (``_3``, …: the first not sent before it), and the results
    after it answer that name, as a result answers the latest call with its id. A later id equal to an earlier
    rename is itself renamed. Each name depends only on what comes before it, so a later turn never changes the
    names of the turns before it (the prompt cache's prefix stays the same).
    """

    __slots__ = ("_fits", "_next", "_now", "_sent", "_wire")

    def __init__(self, wire: Callable[[str], str], fits: Callable[[str], object]) -> None:
        self._wire = wire  # the history's wire id of each id (history_call_ids)
        self._fits = fits  # whether an id is sent as it is (tested inline: every id of every request goes by here)
        self._sent: set[str] = set()  # the wire ids sent so far in this request
        self._now: dict[str, str] = {}  # an id whose latest call was renamed -> that call's name
        # The next number to try for each wire id used again: a thousand reuses of one id must not try 2, 3, …
        # a thousand times each (quadratic: 5,000 reuses took 1.2 s per encode).
        self._next: dict[str, int] = {}

    @classmethod
    def anthropic(cls, messages: Sequence[Message]) -> UniqueCallIds:
        """The names of one Anthropic request's call ids (:func:`history_call_ids` with :data:`ANTHROPIC_IDS`)."""
        return cls(history_call_ids(messages, ANTHROPIC_IDS, anthropic_call_id), _ANTHROPIC_FITS)

    def call(self, call_id: str) -> str:
        """The wire id of the next call with ``call_id`` (calls are named in the order of the request)."""
        wire = call_id if self._fits(call_id) else self._wire(call_id)
        sent = self._sent
        if wire not in sent:
            sent.add(wire)
            return wire
        number = self._next.get(wire, 2)
        while (renamed := f"{wire}_{number}") in sent:
            number += 1
        self._next[wire] = number + 1
        sent.add(renamed)
        self._now[call_id] = renamed
        return renamed

    def result(self, call_id: str) -> str:
        """The wire id of the latest call with ``call_id`` named so far (what a result answers)."""
        now = self._now
        if now and call_id in now:
            return now[call_id]
        wire = call_id if self._fits(call_id) else self._wire(call_id)
        self._sent.add(wire)  # a result answering no call still holds its id: no rename may take it
        return wire


def _message_ids(messages: Sequence[Message]) -> list[str]:
    ids = [call.id for m in messages for call in m.tool_calls]
    ids.extend(m.tool_call_id for m in messages if m.tool_call_id is not None)
    return ids


def check_call_id(call_id: str, rule: CallIdRule, index: int, field: str) -> None:
    """Raise :class:`InvalidHistory` naming ``field`` when the API of ``rule`` refuses ``call_id``."""
    if not rule.fits(call_id):
        shown = call_id if len(call_id) <= 80 else call_id[:80] + "…"
        raise InvalidHistory(f"tool call id {shown!r} is refused by the API: it takes {rule.spelled}",
                             index=index, field=field)
