r"""Which texts of a joined search hold a regex: what the bulk prefilter finds with one search over many texts.

The bulk prefilter searches a need of the patterns without triggers once, over the texts joined with
``SEPARATOR`` (issue 22: one search instead of one per text), and the gate then skips, in a text, a pattern whose
need that search did not find there. The joined search must therefore find every text the need matches alone:

* a regex that reads only its match (no anchor, word boundary or lookaround: nothing of the text around it) matches
  a text alone where it matches the joined text at the same place; ``finditer`` reports such a place unless a match
  begun earlier runs over it. A text a match begins in and ends in holds the regex; a text some match runs across
  a separator into, or out of, is searched again on its own (rare: the built-in needs cannot read the separator).
* any other regex (``^``, ``$``, ``\b``, lookarounds: the separator is not a text's edge) is searched in each text
  on its own, as one text at a time would, and in each string of a text on its own (:func:`found_in_a_string`): a
  message's text is its strings joined with the same separator, and redaction reads each string alone.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ._anchors import parsed_pattern
from ._ledger import SEPARATOR

__all__ = ["found_in_a_string", "holding_texts", "reads_only_its_match"]


@lru_cache(maxsize=256)
def reads_only_its_match(regex: re.Pattern[str]) -> bool:
    """Whether ``regex`` matches at a place whatever the text around the match (no anchor, boundary, lookaround).

    A regex the standard parser cannot be relied on for (see :func:`._anchors.parsed_pattern`) is taken as reading
    around its match: it is searched text by text, never unsoundly.
    """
    parse = parsed_pattern(regex)
    if parse is None:
        return False
    parsed, c = parse
    return not _reads_around(parsed, c)


def found_in_a_string(regex: re.Pattern[str], text: str) -> bool:
    """Whether ``regex`` matches one of the strings of ``text`` (``SEPARATOR`` between) searched on its own.

    For a regex that reads around its match; one that does not is searched in ``text`` whole (a match in a string
    is one in the whole at the same place). A string that may be JSON (tool-call arguments: redaction reads each
    string they decode to on its own, and the bulk surface holds only the text when those are substrings of it) is
    searched in each of its decoded strings too.
    """
    search = regex.search
    for string in text.split(SEPARATOR) if SEPARATOR in text else (text,):
        if search(string) is not None:
            return True
        if string.lstrip()[:1] in _JSON_OPENINGS:
            try:
                decoded = json.loads(string)
            except ValueError:
                continue  # (not JSON: the text is all redaction reads of it)
            except RecursionError:
                return True  # (too deep to read: a suspect)
            if any(search(inner) is not None for inner in _strings_in(decoded)):
                return True
    return False


# What a JSON document that decodes to strings opens with (after blanks).
_JSON_OPENINGS = frozenset('{["')


def _strings_in(decoded: Any) -> list[str]:
    """The strings (mapping keys too) of a decoded JSON document."""
    out: list[str] = []
    pending = [decoded]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            out.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return out


def _reads_around(items: Any, c: Any) -> bool:
    """Whether a parsed regex (``items``: its ``(op, argument)`` pairs) holds an anchor or a lookaround anywhere."""
    for op, av in items:
        if op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            return True
        if any(_reads_around(sub, c) for sub in _subpatterns(av)):
            return True
    return False


def _subpatterns(av: Any) -> list[Any]:
    """The parsed sub-regexes inside an item's argument (a group's body, a branch's alternatives, a repeat's body)."""
    if type(av).__name__ == "SubPattern":
        return [av]
    if isinstance(av, tuple | list):
        return [sub for part in av for sub in _subpatterns(part)]
    return []


def holding_texts(need: re.Pattern[str], joined: str, starts: Sequence[int]) -> set[int]:
    """The indexes of the texts of ``joined`` (each beginning at ``starts``, ``SEPARATOR`` between) ``need`` matches in.

    Exactly the texts ``need.search`` finds a match in one by one (see the module's note).
    """
    if not reads_only_its_match(need):
        ends = [at - 1 for at in starts[1:]]  # (a text ends where the separator after it is)
        ends.append(len(joined))
        return {i for i, (start, end) in enumerate(zip(starts, ends, strict=True))
                if found_in_a_string(need, joined[start:end])}
    # (Where a text ends is read only where a match is: most needs match nowhere in 100,000 ids, and the list of
    # every text's end cost ~10 ms a need there, issue 22.)
    last = len(starts) - 1

    def end_of(i: int) -> int:
        return starts[i + 1] - 1 if i < last else len(joined)  # (a text ends where the separator after it is)

    holding: set[int] = set()
    again: set[int] = set()
    for hit in need.finditer(joined):
        start, end = hit.span()
        first = bisect.bisect_right(starts, start) - 1
        if end <= end_of(first):
            holding.add(first)  # (begun and ended in the text: it matches there alone)
        else:  # (runs over a separator: each text it reads is searched on its own; it may hide their own matches)
            again.update(range(first, bisect.bisect_right(starts, end - 1)))
    holding.update(i for i in again - holding if need.search(joined[starts[i]:end_of(i)]) is not None)
    return holding
