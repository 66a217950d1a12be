"""The scan of a text for secrets: a redactor's patterns compiled for search, one text at a time or many at once.

A :class:`Scanner` holds what a pattern set needs of a text before any of its regexes runs, built once when a
:class:`~contextfold.redact.Redactor` first redacts (copies of the redactor share it): the triggers that let each
pattern run, found all at once (:mod:`._triggers`); what a pattern without triggers needs (a class run,
:mod:`._runs`); the heads every match of a pattern starts with (:mod:`._anchors`), so that its regex is tried only
where they start. :meth:`Scanner.scan` gives the findings of one text, overlaps resolved; :meth:`Scanner.findings`
keeps them (:mod:`._scans`, shared by redactors of the same patterns). :meth:`Scanner.suspect_texts` is the same
search over many texts at once, the bulk prefilter: a text holding no trigger and nothing a pattern needs has no
finding, and :mod:`._gate` looks again at those holding one.

A scan depends on the text and the patterns only: what the redactor remembered is applied after, by
:meth:`Redactor.spans <contextfold.redact.Redactor.spans>`.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..untrusted.regex import PatternTimeout
from ._anchors import heads, lowered_heads
from ._gate import PatternGate
from ._joins import holding_texts
from ._key_rule import key_rule_triggers
from ._ledger import SEPARATOR, joined_starts, search_joined
from ._runs import class_runs
from ._scans import MARKER_RE, Finding, scan_cache
from ._triggers import TriggerFinder

if TYPE_CHECKING:
    from .rules import SecretPattern

__all__ = ["Scanner"]

_log = logging.getLogger(__name__)

# Texts shorter than this are scanned without the heads of the patterns' regexes (see ._anchors): a digest item,
# an id or a short argument is searched at once, and asking the automaton for the heads too cost it ~5% more.
_HEADS_MIN_CHARS = 256
# The bulk prefilter reads texts shorter than this joined, in one automaton call (a session's user lines, tool calls'
# arguments: two thirds of a cold compaction's texts, 7.3 ms one by one against 0.4 joined), the others one by one.
_READ_JOINED_MAX_CHARS = 256
# The patterns that ran past their time limit (each is said once a process).
_timed_out: set[str] = set()


def _warn_timeout(name: str, chars: int) -> None:
    """Say once per pattern (and process) that a redaction pattern timed out and what was done about it."""
    if name in _timed_out:
        return
    _timed_out.add(name)
    _log.warning("redaction pattern %r ran past its time limit on a text of %d characters; the whole text was "
                 "redacted (the pattern backtracks too much: simplify it)", name, chars)


def _need_finder(need: re.Pattern[str]) -> Callable[[str], object]:
    """What tells whether ``need`` finds something in a lower-cased text (a class run: without the regex engine)."""
    runs = class_runs(need)
    return runs.holds if runs is not None else need.search


def _head_starts(hits: Mapping[str, list[int]] | None, wanted: frozenset[str]) -> list[int]:
    """Where any head in ``wanted`` starts, ascending, from the trigger pass's ``hits`` (see ._anchors)."""
    if not hits:
        return []
    found = [starts for head, starts in hits.items() if head in wanted]
    if len(found) <= 1:
        return found[0] if found else []
    return sorted({at for starts in found for at in starts})


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    groups = m.re.groupindex
    for name in sorted(groups):
        if name.startswith("v") and m.group(name) is not None:
            return m.span(name)
    return m.span()


class Scanner:
    """``patterns`` compiled for search: the findings of a text, and the texts of many that may hold one.

    Attributes:
        patterns: the patterns, in priority order (for an identical span, the first one's name is shown).
        triggers: every pattern's trigger words (and the key rule's) and the heads, found in one pass of a text.
        prefilter: what the bulk search looks for (the triggers' needles, the needs of the patterns without
            triggers); None when some pattern may match any text (then every text is scanned).
        gate: the second look at a text the prefilter's search did not clear (see :mod:`._gate`).
        located_heads: for each pattern, the heads its matches start with (None: its regex searches the text).
        scans: the findings of the texts scanned so far, shared by redactors of the same patterns.
    """

    def __init__(self, patterns: tuple[SecretPattern, ...]) -> None:
        self.patterns = patterns
        # Which patterns a text needs: the triggers it holds, all found at once (many patterns share "secret",
        # "key"…), each naming the patterns it lets run; patterns without triggers run when their needs is met.
        triggers = tuple(dict.fromkeys(t for p in patterns for t in p.triggers))
        # The key rule ({"db_pass": "…"} in meta or arguments) applies whatever the patterns: the bulk prefilter
        # must find its words even when no pattern's trigger holds them (builtin=False with the user's own
        # patterns cleared such messages unredacted while one by one they were redacted).
        triggers += key_rule_triggers(triggers)
        # Where each pattern's locating regex (or, without triggers, its need) can match: the strings its
        # matches start with, found in the triggers' pass (None: it searches the text; see ._anchors).
        located = tuple(heads(p.locate) if p.locate is not None else
                        lowered_heads(p.regex) if p.starts is None else None for p in patterns)
        needed = tuple(heads(p.needs) if not p.triggers and p.needs is not None else None for p in patterns)
        self.located_heads = tuple(frozenset(found) if found else None for found in located)
        self._need_heads = tuple(frozenset(found) if found else None for found in needed)
        self.triggers = TriggerFinder(triggers, heads=[h for found in (*located, *needed) if found for h in found])
        by_trigger: dict[str, list[int]] = {t: [] for t in triggers}
        for priority, p in enumerate(patterns):
            for t in dict.fromkeys(p.triggers):
                by_trigger[t].append(priority)
        self._by_trigger = {t: tuple(indexes) for t, indexes in by_trigger.items()}
        self._untriggered = tuple(i for i, p in enumerate(patterns) if not p.triggers)
        # What each pattern without triggers needs, as a search of the lower-cased text (None: it needs nothing).
        self._needs_found = tuple(_need_finder(p.needs) if not p.triggers and p.needs is not None else None
                                  for p in patterns)
        # For bulk redaction: what the patterns without triggers need; None when some pattern may match any text.
        needs = tuple(p.needs for p in patterns if not p.triggers and p.needs is not None)
        untested = any(not p.triggers and p.needs is None for p in patterns)
        separated = any(SEPARATOR in t for t in triggers)
        self.prefilter = None if untested or separated else (self.triggers.needles, needs)
        # (What the prefilter asks again of a text its triggers or needs did not clear: see ._gate.)
        self.gate = PatternGate(patterns, self.triggers, self.located_heads)
        self.scans = scan_cache(patterns)

    def findings(self, text: str) -> tuple[Finding, ...]:
        """:meth:`scan` of ``text``, kept in :attr:`scans` (the same text is redacted again and again)."""
        found = self.scans.get(text)
        if found is None:
            found = self.scan(text)
            self.scans.put(text, found)
        return found

    def scan(self, text: str) -> tuple[Finding, ...]:
        """The secrets the patterns find in ``text``, left to right, without overlaps (not kept: see findings)."""
        found: list[tuple[int, int, int, str]] = []
        patterns = self.patterns
        lowered = text.lower()
        by_trigger = self._by_trigger
        needs_found = self._needs_found
        runs = set(self._untriggered)
        # (A short text is searched by each regex at once: finding the heads too costs it more than it saves.)
        read = self.triggers.read(lowered) if len(lowered) >= _HEADS_MIN_CHARS else None
        same_length = len(lowered) == len(text)
        present, hits = (self.triggers.present(lowered), None) if read is None else read
        for trigger in present:
            runs.update(by_trigger[trigger])  # (SecretPattern.may_match, with each trigger looked for once)
        for priority in sorted(runs):
            pattern = patterns[priority]
            need = needs_found[priority]
            if need is not None:
                need_heads = self._need_heads[priority] if hits is not None else None
                if need_heads is not None:
                    assert pattern.needs is not None
                    # (Tried only where the strings every match of it starts with start: found, or not, the same.)
                    places = _head_starts(hits, need_heads)
                    if not places or not any(map(pattern.needs.match, itertools.repeat(lowered), places)):
                        continue
                elif not need(lowered):
                    continue  # (what a pattern without triggers needs is cheaper to find than its matches)
            if pattern.requires and same_length and not any(r in lowered for r in pattern.requires):
                continue  # (what its accept needs is not in the text: no finding)
            located_heads = self.located_heads[priority] if hits is not None else None
            located = _head_starts(hits, located_heads) if located_heads is not None else None
            if located is not None and not located and same_length:
                continue  # (no head of its regex in the text: no match; a text lowered to another length is searched)
            try:
                matches = pattern.findings(text, lowered, located)
            except PatternTimeout:
                # A pattern that cannot finish cannot vouch for any part of the text: the whole text is its finding.
                _warn_timeout(pattern.name, len(text))
                found.append((0, -len(text), priority, pattern.name))
                continue
            for m, name in matches:
                start, end = _secret_span(m)
                if end > start and not MARKER_RE.fullmatch(text, start, end):
                    found.append((start, -(end - start), priority, name))
        found.sort()
        out: list[Finding] = []
        last_end = -1
        for start, neg_len, _, name in found:
            if start >= last_end:
                out.append(Finding(start, start - neg_len, name))
                last_end = start - neg_len
        return tuple(out)

    def suspect_texts(self, texts: list[str], suspects: set[int], *, joined: bool = False,
                      whole: tuple[str, list[int]] | None = None) -> None:
        """Add to ``suspects`` the index of every text holding a pattern's trigger or need (the prefilter's search).

        ``joined``: the texts are short (ids): the automaton reads them joined, in one call. ``whole``: the texts
        joined and their :func:`~._ledger.joined_starts`, when the caller has them.
        """
        assert self.prefilter is not None
        needles, needs = self.prefilter
        given, suspects = suspects, set(suspects)  # (the texts this search finds are looked at again, below)
        lowered: list[str] | None = None
        joined_text = (SEPARATOR.join(texts) if whole is None else whole[0]) if joined else ""
        if joined and joined_text.isascii():
            # (Many short texts, ASCII: lower-cased in one call, which keeps every length, so the same starts.)
            joined_text = joined_text.lower()
            starts = joined_starts(texts) if whole is None else whole[1]
        else:
            lowered = [t.lower() for t in texts]  # (one by one: lower-casing may change a text's length)
            starts = joined_starts(lowered)
            # (Texts read one by one are joined below only where a search needs it: a copy of the whole chunk.)
            joined_text = SEPARATOR.join(lowered) if joined else ""
        finder = self.triggers
        positions = finder.positions(joined_text) if joined else None
        # (Each text's read: its triggers and where the heads start, for the gate below; see TriggerFinder.read.)
        reads: list[tuple[set[str], dict[str, list[int]]] | None] | None = None
        if positions is not None:
            suspects.update(bisect.bisect_right(starts, at) - 1 for at in positions)
        elif finder.one_pass:  # (one pass per text; the matches of a text that holds many are not all wanted)
            lowered = lowered or [t.lower() for t in texts]
            # The pass that finds the triggers also finds the heads the gate asks for (issue 22: the gate read each
            # suspect again, a second pass over three quarters of a cold compaction's text); the reader's automaton
            # is not slower than the triggers' own. Where it cannot read a text (a lone surrogate), as before.
            # Short texts are searched joined (no trigger holds the separator: each text holding one has a position
            # in it); the gate reads the few of them that are suspects on its own.
            short = [i for i, text in enumerate(lowered) if len(text) < _READ_JOINED_MAX_CHARS and i not in suspects]
            chosen = [lowered[i] for i in short]
            positions = finder.positions(SEPARATOR.join(chosen)) if len(short) > 1 else None
            unread = suspects if positions is None else suspects.union(short)
            if positions is not None:
                short_starts = joined_starts(chosen)
                suspects.update(short[bisect.bisect_right(short_starts, at) - 1] for at in positions)
            reads = [None if i in unread else finder.read(text) for i, text in enumerate(lowered)]
            suspects.update(i for i, (text, read) in enumerate(zip(lowered, reads, strict=True)) if i not in unread
                            and (read[0] if read is not None else finder.holds_any(text)))
        else:
            joined_text = joined_text or SEPARATOR.join(lowered or ())
            search_joined(joined_text, starts, needles, suspects)
        unmet: list[tuple[re.Pattern[str], set[int]]] = []  # (each need searched in every text: the texts holding it)
        for need in needs:
            runs = class_runs(need)
            if runs is not None:  # (a class run: each text not yet suspect, at C speed; see contextfold.redact._runs)
                if joined and not runs.holds(joined_text):
                    continue  # (no run crosses the separator: none in the whole, none in any of the short texts)
                lowered = lowered or [t.lower() for t in texts]
                suspects.update(i for i, text in enumerate(lowered) if i not in suspects and runs.holds(text))
                continue
            joined_text = joined_text or SEPARATOR.join(lowered or ())
            # (Exactly the texts it matches alone: what clearing a text without triggers relies on; see ._joins.)
            holding = holding_texts(need, joined_text, starts)
            suspects |= holding
            unmet.append((need, holding))
        # A trigger is short and common, a base64 run any long path: each text found is looked at again, and
        # cleared when no pattern it could set off can match in it (issue 22; a necessary condition, see ._gate).
        # It is told what the search above read of the text: its heads, and the needs it does not hold.
        gate = self.gate
        for i in suspects - given:
            text = texts[i]
            if gate.may_hold(text, lowered[i] if lowered is not None else text.lower(),
                             reads[i] if reads is not None else None,
                             [need for need, holding in unmet if i not in holding]):
                given.add(i)

