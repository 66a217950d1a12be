r"""Which texts of a joined search hold a regex: what the bulk prefilter finds with one search over many texts.

The bulk prefilter searches a need of the patterns without triggers once, over the texts joined with
``SEPARATOR`` (issue 22: one search instead of one per text), and the gate then skips, in a text, a pattern whose
need that search did not find there. The joined search must therefore find every text the need matches alone:

* a regex that reads only its match (no anchor, word boundary or lookaround: nothing of the text around it) matches
  a text alone where it matches the joined text at the same place; ``finditer`` reports such a place unless a match
  begun earlier runs over it. A text a match begins in and ends in holds the regex; a text some match runs across
  a separator into, or out of, is searched again on its own (rare: the built-in needs cannot read the separator).
* any other regex (``^``, ``$``, ``\b``, lookarounds: the separator is not a text's edge) is searched in each text
  on its own, as one text at a time would.
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

__all__ = ["holding_texts", "reads_only_its_match"]

# The Python versions whose private regex parser (``re._parser``) this reads was checked on (as ._anchors'). On
# another, every regex is searched text by text: never unsound.
_PARSER_CHECKED = frozenset({(3, 11), (3, 12), (3, 13)})


@lru_cache(maxsize=256)
def reads_only_its_match(regex: re.Pattern[str]) -> bool:
    """Whether ``regex`` matches at a place whatever the text around the match (no anchor, boundary, lookaround)."""
    if not isinstance(regex.pattern, str) or sys.version_info[:2] not in _PARSER_CHECKED:
        return False
    try:
        from re import _constants as c  # type: ignore[attr-defined]
        from re import _parser  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover (a Python without the standard parser's modules: text by text)
        return False
    try:
        parsed = _parser.parse(regex.pattern, regex.flags)
    except Exception:  # (a pattern the stand-alone parse refuses: text by text)
        return False
    return not _reads_around(parsed, c)


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
    ends = [at - 1 for at in starts[1:]]  # (a text ends where the separator after it is)
    ends.append(len(joined))
    if not reads_only_its_match(need):
        return {i for i, (start, end) in enumerate(zip(starts, ends, strict=True))
                if need.search(joined[start:end]) is not None}
    holding: set[int] = set()
    again: set[int] = set()
    for hit in need.finditer(joined):
        start, end = hit.span()
        first = bisect.bisect_right(starts, start) - 1
        if end <= ends[first]:
            holding.add(first)  # (begun and ended in the text: it matches there alone)
        else:  # (runs over a separator: each text it reads is searched on its own; it may hide their own matches)
            again.update(range(first, bisect.bisect_right(starts, end - 1)))
    holding.update(i for i in again - holding if need.search(joined[starts[i]:ends[i]]) is not None)
    return holding
