"""Whether a text can hold a secret at all: the bulk prefilter's second look at the texts holding a trigger.

The bulk prefilter (``Scanner.suspect_texts``: ``redact_messages``, ``learn_from``, ``scan_words``) clears a text
holding no pattern's trigger and nothing a pattern without triggers needs; the others are redacted whole. Triggers
are short and common (``key``, ``token``, ``pass``, ``sk``, ``value``), and a base64 run is any path of 24
characters: in the lm32b loop a third of the digest items and 70% of the messages redacted in bulk were suspects,
and 1% of them held a secret; a suspect message is redacted field by field, a suspect word scanned (issue 22).

:class:`PatternGate` looks again at such a text with what each pattern the scan would run there must find first,
and turns it down only when none can match: never a text the scan finds a secret in (it is a necessary condition,
as the triggers are). For each pattern whose trigger the text holds:

- a pattern with a locating regex (``locate``, over the lower-cased text; every match of the pattern starts where
  it matches): that regex must match, tried only where its heads start (as the scan does, see :mod:`._anchors`);
- a triggered pattern with ``needs`` (a superset of its matches over the lower-cased text: the XML element's
  ``</``, the URL's ``user:password@``): that must be found;
- a case-sensitive regex: one of the strings all its matches start with (:func:`._anchors.openings`, ``SK`` for
  Twilio's keys, ``-----BEGIN `` for a PEM block) must be in the text itself.

A pattern without triggers: what it needs, as before, except a pattern found at the starts of class runs (the
base64 rule): its own findings, exactly (a run opening with ``/`` or ``g``-``v`` does not decode to text, see
``rules._rejects_base64_run``; one that decodes to no text and is not an AWS key's length holds nothing). The key
rule of a mapping (``{"db_pass": "…"}``, any JSON or meta key ending in a secret's name) is kept: a text in which
a secret's name ends a string (before the separator, a quote, or the end) is a suspect.

The texts are a message's strings joined with ``_ledger.SEPARATOR``, and the scan reads each string alone: a need
or locating regex that reads around its match (an anchor, boundary or lookaround: ``^zz`` misses a message's name
joined after its content) is searched in each string on its own; one that reads only its match (every built-in
one) in the text whole, where each string's match is (see :mod:`._joins`).

A text lower-cased to another length (some non-ASCII letters) is not looked at again: the scan searches such a
text whole. ``tests/test_redact_gate.py`` plants secrets of every rule in random texts and JSON and checks that each
text the scan finds one in is a suspect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from ..untrusted.regex import PatternTimeout
from ._anchors import openings, search_at
from ._joins import found_in_a_string, reads_only_its_match
from ._key_words import KEY_NAME_WORDS

if TYPE_CHECKING:
    from ._triggers import TriggerFinder
    from .rules import SecretPattern

__all__ = ["KEY_NAME_WORDS", "PatternGate", "names_a_key"]

# (KEY_NAME_WORDS: the words a key the key rule redacts under ends with, kept in a leaf module, see _key_words.)
_KEY_NAME_ENDS = tuple((word, f'{word}"', f"{word}\x00") for word in KEY_NAME_WORDS)


def names_a_key(lowered: str, words: Sequence[tuple[str, str, str]] = _KEY_NAME_ENDS) -> bool:
    """Whether a string of ``lowered`` (a message's strings joined, or JSON) may be a key the key rule redacts under.

    ``words``: those of :data:`_KEY_NAME_ENDS` to look for (the others are known not to be in ``lowered``).
    """
    return any(word in lowered and (quoted in lowered or separated in lowered or lowered.endswith(word))
               for word, quoted, separated in words)


# What a pattern must find first, over (the text, the text lower-cased, where the automaton's heads start or None).
_Check = Callable[[str, str, Mapping[str, list[int]] | None], bool]


def _starts_of(hits: Mapping[str, list[int]], wanted: frozenset[str]) -> list[int]:
    found = sorted({at for head, starts in hits.items() if head in wanted for at in starts})
    return found


def _found(regex: re.Pattern[str]) -> Callable[[str], object | None]:
    """Not None when ``regex`` matches a string of a lower-cased text (its strings joined) searched as the scan does.

    (A regex reading only its match is its own ``search``: the built-in checks cost what they did.)
    """
    if reads_only_its_match(regex):
        return regex.search
    return lambda lowered: True if found_in_a_string(regex, lowered) else None


def _at_heads(locate: re.Pattern[str], heads: frozenset[str] | None) -> _Check:
    """Whether ``locate`` matches the lower-cased text, tried where its heads start when the automaton found them."""
    if not reads_only_its_match(locate):  # (in each string alone, everywhere: a superset of where its heads are)
        found = _found(locate)
        return lambda text, lowered, hits: found(lowered) is not None
    if heads is None:
        return lambda text, lowered, hits: locate.search(lowered) is not None

    def located(text: str, lowered: str, hits: Mapping[str, list[int]] | None) -> bool:
        if hits is None:
            return locate.search(lowered) is not None
        places = _starts_of(hits, heads)
        return bool(places) and next(search_at(locate, lowered, places), None) is not None

    return located


def _located(pattern: SecretPattern, heads: frozenset[str] | None) -> _Check | None:
    """What a pattern with triggers must find in a text holding one (None: it may match wherever they are)."""
    check = _where_located(pattern, heads)
    required = pattern.requires
    if not required:
        return check
    # (may_hold looks only at texts lower-cased to their own length: SecretPattern.requires holds there)
    if check is None:
        return lambda text, lowered, hits: any(r in lowered for r in required)
    return lambda text, lowered, hits: any(r in lowered for r in required) and check(text, lowered, hits)


def _where_located(pattern: SecretPattern, heads: frozenset[str] | None) -> _Check | None:
    """:func:`_located` but for what ``pattern.requires``."""
    locate, needs = pattern.locate, pattern.needs
    if locate is not None:
        where = _at_heads(locate, heads)
        if needs is None:
            return where
        needed = _found(needs)
        return lambda text, lowered, hits: needed(lowered) is not None and where(text, lowered, hits)
    if needs is not None:
        needed = _found(needs)
        return lambda text, lowered, hits: needed(lowered) is not None
    starts = openings(pattern.regex)
    if starts is not None:
        return lambda text, lowered, hits: any(opening in text for opening in starts)
    return None


def _untriggered(pattern: SecretPattern) -> _Check | None:
    """What a pattern without triggers must find (None: it may match any text)."""
    if pattern.starts is not None:  # (found only where a class run starts: exactly, at C speed but for the runs)
        return lambda text, lowered, hits: bool(pattern.findings(text))
    needs = pattern.needs
    if needs is None:
        return None
    needed = _found(needs)
    return lambda text, lowered, hits: needed(lowered) is not None


class PatternGate:
    """Whether a text holding a trigger can hold a secret (see the module's doc): False only when it cannot.

    Args:
        patterns: The redactor's patterns, in priority order.
        finder: Their triggers' finder (with the heads of their locating regexes).
        located_heads: For each pattern, the heads its locating regex's matches start with (None: not known).
    """

    def __init__(self, patterns: Sequence[SecretPattern], finder: TriggerFinder,
                 located_heads: Sequence[frozenset[str] | None]) -> None:
        self._finder = finder
        self._by_trigger: dict[str, list[_Check | None]] = {}
        for pattern, heads in zip(patterns, located_heads, strict=True):
            check = _located(pattern, heads)
            for trigger in dict.fromkeys(pattern.triggers):
                self._by_trigger.setdefault(trigger, []).append(check)
        self._untriggered = tuple(_untriggered(p) for p in patterns if not p.triggers)
        # (What each of them needs, as the bulk prefilter searched for it: one it did not find there cannot match.)
        self._untriggered_needs = tuple(p.needs for p in patterns if not p.triggers)
        # The key rule's words by a trigger each holds (then in a text only when the trigger is), or looked for.
        self._key_words: dict[str, list[tuple[str, str, str]]] = {}
        self._key_words_unfound: list[tuple[str, str, str]] = []
        for ends in _KEY_NAME_ENDS:
            holder = next((t for t in finder.triggers if t in ends[0]), None)
            if holder is None:
                self._key_words_unfound.append(ends)
            else:
                self._key_words.setdefault(holder, []).append(ends)

    def may_hold(self, text: str, lowered: str, read: tuple[set[str], dict[str, list[int]]] | None = None,
                 unmet: Collection[re.Pattern[str]] = ()) -> bool:
        """Whether the scan of ``text`` (``lowered``: ``text.lower()``) may find a secret, or the key rule may apply.

        ``read``: ``TriggerFinder.read(lowered)``, when the caller has it (the prefilter's own pass over the text).
        ``unmet``: needs of patterns without triggers known not to match ``lowered`` (the prefilter searched for
        them): those patterns cannot match (a pattern's need holds wherever it does), and are not tried.
        """
        if len(lowered) != len(text):
            return True
        if read is None:
            read = self._finder.read(lowered)
        if read is None:
            present, hits = self._finder.present(lowered), None
        else:
            present, hits = read
        try:
            for trigger in present:
                for check in self._by_trigger.get(trigger, ()):
                    if check is None or check(text, lowered, hits):
                        return True
            # (A trigger in one of the key rule's words is in the text when the word is: those words only.)
            words = [ends for trigger in present for ends in self._key_words.get(trigger, ())]
            if names_a_key(lowered, words + self._key_words_unfound if self._key_words_unfound else words):
                return True
            if unmet:
                return any(check is None or check(text, lowered, hits)
                           for check, need in zip(self._untriggered, self._untriggered_needs, strict=True)
                           if need not in unmet)
            return any(check is None or check(text, lowered, hits) for check in self._untriggered)
        except PatternTimeout:
            return True
