"""A secret split across two user messages: the key phrase ends one ("my password is"), the bare value is the next.

People type a credential the way they would say it: "Log into staging, my password is", send, then the value alone.
No rule finds it: the key phrase and the value are in two texts, and a bare value matches no pattern. The session's
memory then never learns it, and it reached the view, the archive and the summary in clear. :class:`SplitSecrets`
follows the user messages in the order they are added: after one whose text ends with a key phrase, the next user
message that is a single bare token (no space, specific enough to remember) is the value; it is learned into the
session's memory, which redacts it wherever it stands (the generation check renews what was found clean before).

Messages of other roles in between (the assistant's "go ahead", tool results) leave the phrase waiting; any other
user message ends the wait. A look at a message costs a slice of its last characters and a test of its last one:
most texts end with something no key phrase ends with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..messages import Message
from .memory import rememberable

__all__ = ["SplitSecrets"]

# Characters at the end of a message that may hold its key phrase.
_TAIL_CHARS = 64
# The longest bare value taken (a key, a password); longer single tokens are data, not something typed.
_MAX_VALUE_CHARS = 256
# A key phrase at the very end of a text, with the kind its value is learned as.
_KEY_AT_END = re.compile(
    r"(?i)\b(?:(?P<password>pass(?:word|phrase|wd|code))|(?P<api_key>api[ _-]?key|access[ _-]?key)"
    r"|(?P<secret>secret|token|private[ _-]?key))(?:\s+(?:is|was))?\s*[:=]?\s*\Z")
# The last character of a key phrase (its words' last letters, ':' and '='): a cheap test that most texts fail.
_PHRASE_ENDS = frozenset("dentyesDENTYES:=")


def key_at_end(text: str) -> str | None:
    """The kind of secret the key phrase ending ``text`` names ("my password is"), or None."""
    tail = text[-_TAIL_CHARS:].rstrip()
    if not tail or tail[-1] not in _PHRASE_ENDS:
        return None
    found = _KEY_AT_END.search(tail)
    return found.lastgroup if found is not None else None


def bare_value(text: str) -> str | None:
    """``text`` as a value typed alone: one token, without spaces, specific enough to remember; else None."""
    value = text.strip()
    if not value or len(value) > _MAX_VALUE_CHARS or any(c.isspace() for c in value):
        return None
    return value if rememberable(value) else None


class SplitSecrets:
    """Follows a session's user messages; finds the values typed after a message that ends with a key phrase."""

    def __init__(self) -> None:
        self._waiting: str | None = None  # the kind named by the latest user message's key phrase

    def values(self, messages: Iterable[Message]) -> list[tuple[str, str]]:
        """``(value, kind)`` of every value ``messages`` (added after the ones seen before) type after a phrase."""
        found: list[tuple[str, str]] = []
        for m in messages:
            if m.role != "user":
                continue
            content = m.content
            text = content if type(content) is str else m.text
            if self._waiting is not None:
                value = bare_value(text)
                if value is not None:
                    found.append((value, self._waiting))
            self._waiting = key_at_end(text)
        return found
