"""Secret redaction, applied to everything before it leaves the process (events, archives, logs).

Each :class:`SecretPattern` finds one kind of secret; only the secret itself is replaced (``password=hunter2``
becomes ``password=[REDACTED:password]``), so the text around it is byte-for-byte unchanged and a redacted log
still reads naturally. All patterns are matched against the original text and overlapping findings are resolved
before anything is replaced, so one replacement can never create or hide another match.

What the model sees is not redacted unless the configuration asks for it: the agent may legitimately need a
token it was given. Redaction protects what is exported and archived.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import logging
import operator
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from ..messages import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
    freeze,
    is_opaque,
)
from ..telemetry._pace import GilPacer
from ..untrusted.regex import PatternTimeout
from ._anchors import heads, lowered_heads
from ._callback import CallbackMemo
from ._gate import PatternGate
from ._ledger import (
    ID_KEY,
    MAX_PASSES,
    SEPARATOR,
    Ledger,
    SameMessage,
    copy_groups,
    mentions_any,
    read_surface,
    surface,
)
from ._provider_state import redact_provider_state
from ._runs import class_runs
from ._scans import Finding, ScanCache, scan_cache
from ._triggers import TriggerFinder
from .memory import LEARN_MIN_CHARS, MAX_LEARNED, PIECE_CHARS, SecretMemory

if TYPE_CHECKING:
    from .rules import SecretPattern

__all__ = [
    "LEARN_MIN_CHARS",
    "MAX_LEARNED",
    "PERSONAL_DATA_CHOICES",
    "Finding",
    "Redactor",
    "marker",
]

_log = logging.getLogger(__name__)
# Kinds of personal data (contextfold.redact._personal): redacted where asked, never remembered as secrets.
_PERSONAL_KINDS = frozenset({"email", "phone", "card_number"})
# A message without meta["id"], to the bulk learning's test of a copy's id (such a copy's own part is nothing).
_NO_ID = object()
# What is remembered when remembering is off: nothing, the same object every time.
_NOTHING: Mapping[str, str] = MappingProxyType({})

# A finding that is exactly a marker is a secret redacted earlier: renaming it (`api_key = "[REDACTED:openai_key]"`
# seen again by the api_key pattern) would make redaction depend on how many times it ran (the manager redacts a
# transcript and the archive redacts it again).
_MARKER_RE = re.compile(r"\[REDACTED:[^\]\n]*\]")
# The batch prefilter of redact_messages (issue 12: a 100,000-message transcript spent 4.5 s redacting text by text):
# past this many remembered secrets it is not used (each one is searched for on its own); texts are joined by
# SEPARATOR (contextfold.redact._ledger).
_PREFILTER_MAX_LEARNED = 64
# The batch prefilter lowers and joins the texts of this many characters at a time (issue 22: 100,000 distinct
# messages held their texts three times over at once, and the strings decoded from their arguments with them).
_PREFILTER_CHUNK_CHARS = 4_000_000


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


def marker(name: str) -> str:
    """The text a secret of kind ``name`` is replaced with."""
    return f"[REDACTED:{name}]"


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    groups = m.re.groupindex
    for name in sorted(groups):
        if name.startswith("v") and m.group(name) is not None:
            return m.span(name)
    return m.span()


# Where personal data (e-mail addresses, phone and card numbers) is redacted too: "telemetry" (the default: what
# exporters send out of the process), "everywhere" (the archive as well), "nowhere".
PERSONAL_DATA_CHOICES = ("telemetry", "everywhere", "nowhere")
# Texts shorter than this are scanned without the heads of the patterns' regexes (see ._anchors): a digest item,
# an id or a short argument is searched at once, and asking the automaton for the heads too cost it ~5% more.
_HEADS_MIN_CHARS = 256
# A text is cut around its secrets within this distance of the cut (more than any secret is long).
_CUT_WINDOW_CHARS = 8192
# mentions_secret remembers its answers for this many words at most, each this long at most (digest items).
_MENTIONED_MAX = 8_192
_MENTIONED_MAX_CHARS = 256
# Of a bulk redaction of at most this many messages (a turn's add(), not a long history's transcript), the tool
# outputs the prefilter cleared are remembered as scanned: the read-ahead blanks them for their digests next.
_REMEMBER_CLEARED_MAX_BATCH = 1_000
# The paced read-ahead redacts its batch in bulk slices of about this many characters, pausing between them.
_AHEAD_SLICE_CHARS = 16_384


# redact_text remembers the strings up to this long found clean, this many characters of them at most (per memory
# generation; with a set's slot and a string's header, ~8 MB for short strings at the cap).
_PLAIN_MAX_CHARS = 256
_PLAIN_BUDGET_CHARS = 1 << 20

# A remembered value this long, all in the base64 alphabet, is also remembered decoded when that is readable text.
_ENCODED_MIN_CHARS = 8
_BASE64_RE = re.compile(r"[A-Za-z0-9+/]+={0,2}")

class Redactor:
    """Replaces secrets in text, JSON-like objects and messages.

    Example:
        >>> Redactor().redact_text("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx")
        'export OPENAI_API_KEY=[REDACTED:openai_key]'

    Args:
        enabled: when False every method returns its input unchanged (the caller should emit a warning event).
        patterns: user patterns, ``{name: regex}`` or :class:`SecretPattern` objects, checked with the built-ins.
            Regexes given as text run on the time-limited engine of :mod:`contextfold.untrusted.regex`; one that
            runs past the limit on a text redacts that whole text (see :meth:`SecretPattern.untrusted`).
        builtin: whether the built-in patterns are used.
        disabled: names of built-in patterns to skip (for example ``{"url_credentials"}``).
        callback: a last pass over every redacted string, for secrets no regex describes. Its result must depend on
            its input only: its result for each string is kept (bounded), so it sees each string about once.
        apply_to_model: a flag the context manager reads: redact what the model sees too (off by default).
        remember: replace later repeats of every secret found (the value, its JSON forms and its long runs of
            letters and digits, see :mod:`contextfold.redact.memory`), even where no pattern would recognise it.
        memory: where remembered secrets are kept: a session's :class:`~contextfold.redact.memory.SecretMemory`
            (a manager gives its redactor the session's, kept in the session's store); a memory of its own when
            None.
        personal_data: where e-mail addresses, phone and card numbers are redacted as well (never remembered):
            ``"telemetry"`` (what :meth:`for_telemetry` redacts: events leaving the process), ``"everywhere"`` (this
            redactor too: the archive), ``"nowhere"``.
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        patterns: Mapping[str, str] | Iterable[SecretPattern] = (),
        builtin: bool = True,
        disabled: Iterable[str] = (),
        callback: Callable[[str], str] | None = None,
        apply_to_model: bool = False,
        remember: bool = True,
        memory: SecretMemory | None = None,
        personal_data: str = "telemetry",
    ) -> None:
        skip = frozenset(disabled)
        if skip:
            from .rules import BUILTIN_PATTERNS

            unknown = skip - {p.name for p in BUILTIN_PATTERNS}
            if unknown:
                raise ValueError(f"disabled: unknown built-in pattern(s) {sorted(unknown)}")
        if personal_data not in PERSONAL_DATA_CHOICES:
            raise ValueError(f"personal_data: expected one of {', '.join(PERSONAL_DATA_CHOICES)}, "
                             f"got {personal_data!r}")
        if isinstance(patterns, Mapping):
            from .rules import SecretPattern

            user = [SecretPattern.untrusted(name, rx) for name, rx in patterns.items()]
        else:
            user = list(patterns)
        # The built-in patterns are compiled by the first redaction (see patterns), not by the constructor.
        self._user_patterns = tuple(user)
        self._skip = skip
        self._builtin = builtin
        self._patterns: tuple[SecretPattern, ...] | None = None
        self.enabled = enabled
        self.callback = callback
        self._called = CallbackMemo(callback) if callback is not None else None  # (shared by for_session's twins)
        self.apply_to_model = apply_to_model
        self.remember = remember
        self.memory = memory if memory is not None else SecretMemory()
        self.personal_data = personal_data
        self._with_personal = personal_data == "everywhere"
        self._ledger = Ledger()
        # mentions_secret's answers, valid at one generation of the memory (see there); each copy starts its own
        # (the memory, its generation then, each word asked -> (its answer, the generation it holds at))
        self._mentioned: tuple[SecretMemory, int, dict[str, tuple[bool, int]]] | None = None
        # redact_text's short strings found clean: (id of the redactor, its memory, the generation, the strings)
        self._plain: tuple[int, SecretMemory, int, set[str], list[int]] | None = None  # (+ the characters held)

    # -- copies sharing what they can ---------------------------------------------------------------------------
    def for_session(self, memory: SecretMemory) -> Redactor:
        """This redactor (same patterns, same settings, shared scans) remembering into ``memory``.

        What a manager does with the redactor it is given: the secrets of a session are the session's, even when
        one configured redactor is handed to many managers.
        """
        twin = copy.copy(self)
        twin.memory = memory
        twin._ledger = Ledger()  # (what it redacted depends on the memory)
        twin._mentioned = None
        return twin

    def for_telemetry(self) -> Redactor:
        """The redactor for events leaving the process: personal data too, unless ``personal_data="nowhere"``.

        It shares this redactor's memory: a secret either learns is redacted by both.
        """
        if self.personal_data == "nowhere" or self._with_personal:
            return self
        twin = copy.copy(self)
        twin._with_personal = True
        twin._patterns = None  # (resolved again, with the personal-data patterns)
        twin._ledger = Ledger()
        twin._mentioned = None
        return twin

    @property
    def patterns(self) -> tuple[SecretPattern, ...]:
        """The patterns in use: the user's first (for an identical span, their name is shown), then the built-ins."""
        if self._patterns is None:
            chosen: list[SecretPattern] = []
            if self._builtin:
                from .rules import BUILTIN_PATTERNS

                chosen = [p for p in BUILTIN_PATTERNS if p.name not in self._skip]
            if self._with_personal:
                from ._personal import PERSONAL_PATTERNS

                chosen.extend(PERSONAL_PATTERNS)
            patterns = (*self._user_patterns, *chosen)
            # Which patterns a text needs: the triggers it holds, all found at once (many patterns share "secret",
            # "key"…), each naming the patterns it lets run; patterns without triggers run when their needs is met.
            triggers = tuple(dict.fromkeys(t for p in patterns for t in p.triggers))
            # Where each pattern's locating regex (or, without triggers, its need) can match: the strings its
            # matches start with, found in the triggers' pass (None: it searches the text; see ._anchors).
            located = tuple(heads(p.locate) if p.locate is not None else
                            lowered_heads(p.regex) if p.starts is None else None for p in patterns)
            needed = tuple(heads(p.needs) if not p.triggers and p.needs is not None else None for p in patterns)
            self._located_heads = tuple(frozenset(found) if found else None for found in located)
            self._need_heads = tuple(frozenset(found) if found else None for found in needed)
            self._triggers = TriggerFinder(triggers, heads=[h for found in (*located, *needed) if found for h in found])
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
            self._prefilter = None if untested or separated else (self._triggers.needles, needs)
            # (What the prefilter asks again of a text its triggers or needs did not clear: see ._gate.)
            self._gate = PatternGate(patterns, self._triggers, self._located_heads)
            self._scan_memory = scan_cache(patterns)
            self._patterns = patterns
        return self._patterns

    @property
    def _scans(self) -> ScanCache:
        if self._patterns is None:
            self.patterns  # noqa: B018 (resolves the patterns and their cache)
        return self._scan_memory

    @property
    def _learned(self) -> Mapping[str, str]:
        """What is remembered (a new object whenever something is learned; empty when ``remember`` is off)."""
        return self.memory.table if self.remember else _NOTHING

    def learn(self, secret: str, name: str) -> None:
        """Remember ``secret`` so that its repeats are redacted as ``name`` (see ``remember``).

        Personal data is never remembered: an address redacted from an event stays exact in the archive.
        """
        if not self.remember or name in _PERSONAL_KINDS:
            return
        self.memory.learn(secret, name)
        if ":" not in secret and len(secret) >= _ENCODED_MIN_CHARS and _BASE64_RE.fullmatch(secret):
            # A value in base64 (user:password in Basic auth, a Kubernetes Secret's data, a docker auth) may also be
            # written out decoded later (`base64 -d`), where no rule sees it: its readable decoded form is a secret
            # too. (Keys and hex tokens decode to bytes that are not text, and are left alone.)
            from ._pattern import decoded_text

            decoded = decoded_text(secret.rstrip("="))
            if decoded is not None:
                value = decoded.partition(":")[2] if name == "basic_auth" else decoded.strip()
                if value:
                    self.memory.learn(value, "password" if name == "basic_auth" else name)

    def learn_text(self, text: str) -> None:
        """Remember the secrets the patterns find in ``text`` (a whole tool output whose view shows only part)."""
        if self.enabled and self.remember and text:
            for f in self.scan(text):
                self.learn(text[f.start : f.end], f.name)

    # -- text ---------------------------------------------------------------------------------------------------
    def scan(self, text: str) -> list[Finding]:
        """The secrets in ``text``, left to right, without overlaps (the earliest, then longest, finding wins)."""
        cached = self._scans.get(text)
        if cached is None:
            cached = self._scan(text)
            self._scans.put(text, cached)
        return list(cached)

    def _scan(self, text: str) -> tuple[Finding, ...]:
        found: list[tuple[int, int, int, str]] = []
        patterns = self.patterns
        lowered = text.lower()
        by_trigger = self._by_trigger
        needs_found = self._needs_found
        runs = set(self._untriggered)
        # (A short text is searched by each regex at once: finding the heads too costs it more than it saves.)
        read = self._triggers.read(lowered) if len(lowered) >= _HEADS_MIN_CHARS else None
        same_length = len(lowered) == len(text)
        present, hits = (self._triggers.present(lowered), None) if read is None else read
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
            located_heads = self._located_heads[priority] if hits is not None else None
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
                if end > start and not _MARKER_RE.fullmatch(text, start, end):
                    found.append((start, -(end - start), priority, name))
        found.sort()
        out: list[Finding] = []
        last_end = -1
        for start, neg_len, _, name in found:
            if start >= last_end:
                out.append(Finding(start, start - neg_len, name))
                last_end = start - neg_len
        return tuple(out)

    def spans(self, text: str) -> list[Finding]:
        """Every secret in ``text``: what the patterns find (learning it), then what is remembered, without overlaps.

        Remembered secrets are looked for after learning what this text teaches, so a value found in context here
        is found bare further on in the same text.
        """
        findings = self.scan(text)
        for f in findings:
            self.learn(text[f.start : f.end], f.name)
        remembered = self.memory.spans(text) if self.remember else []
        if not remembered:
            return findings
        merged = sorted([*findings, *(Finding(s, e, k) for s, e, k in remembered)],
                        key=lambda f: (f.start, -f.end))
        out: list[Finding] = []
        last_end = -1
        for f in merged:
            if f.start >= last_end and not _MARKER_RE.fullmatch(text, f.start, f.end):
                out.append(f)
                last_end = f.end
        return out

    def warm(self, messages: Iterable[Message], *, paced: bool = True) -> int:
        """Scan (and remember) every text :meth:`redact_message` will scan in ``messages``, learning nothing.

        Meant for a background thread while the agent waits for its model, or for ``add()`` (``paced=False``: the
        agent's own thread must not pause for itself): a later transcript of these messages then finds them
        scanned. Secrets are learned only when a message is really redacted, as without warming. Paced, it works in
        slices that leave the GIL to other threads; returns how many messages were looked at.
        """
        if not self.enabled:
            return 0
        # A shadow shares the scans but learns into a memory of its own, which is dropped.
        shadow = copy.copy(self)
        shadow.memory = SecretMemory()
        shadow.callback = None
        shadow._ledger = Ledger()
        shadow._mentioned = None
        return shadow.redact_ahead(messages, paced=paced)

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced by its marker; the rest is unchanged."""
        if not self.enabled or not text:
            return text
        plain = self._plain_strings() if len(text) <= _PLAIN_MAX_CHARS else None
        if plain is not None and text in plain:
            found: list[Finding] = []
        else:
            found = self.spans(text)
            if not found and plain is not None:
                self._remember_plain(plain, text)
        if not found:
            result = text
        else:
            pieces: list[str] = []
            pos = 0
            for f in found:
                pieces.append(text[pos : f.start])
                pieces.append(marker(f.name))
                pos = f.end
            pieces.append(text[pos:])
            result = "".join(pieces)
        if self.callback is None:
            return result
        called = self._called
        if called is None or called.callback is not self.callback:  # (a callback set after construction)
            called = self._called = CallbackMemo(self.callback)
        return called(result)

    def _plain_strings(self) -> set[str]:
        """The short strings :meth:`spans` found nothing in at the memory's present generation (see redact_text).

        A message's meta values, mapping keys and small arguments come back in every message (issue 22: looking
        each up in the scans and the memory was a fifth of redacting a bulk add's messages). The patterns never
        change, and what the memory finds changes only with its generation: the set is for one generation, of one
        memory, of this redactor (not a copy of it, which may have other patterns).
        """
        generation = self._generation()
        known = self._plain
        if known is None or known[0] != id(self) or known[1] is not self.memory or known[2] != generation:
            known = self._plain = (id(self), self.memory, generation, set(), [0])
        return known[3]

    def _remember_plain(self, plain: set[str], text: str) -> None:
        """Add ``text`` (found clean, nothing learned) to ``plain``, emptied first when it would hold too much."""
        known = self._plain
        if known is None or known[3] is not plain:
            return  # (the generation moved on meanwhile)
        held = known[4]
        if held[0] + len(text) > _PLAIN_BUDGET_CHARS:
            plain.clear()
            held[0] = 0
        plain.add(text)  # (nothing found and nothing learned: the generation the set is for still holds)
        held[0] += len(text)

    def blank(self, text: str) -> str:
        """``text`` with every secret replaced by spaces: what a digest or an outline may pick words from."""
        if not self.enabled or not text:
            return text
        found = self.spans(text)
        if not found:
            return text
        pieces: list[str] = []
        pos = 0
        for f in found:
            pieces.append(text[pos : f.start])
            pieces.append(" " * (f.end - f.start))
            pos = f.end
        pieces.append(text[pos:])
        return "".join(pieces)

    def digest_state(self) -> Hashable:
        """What :meth:`blank` and :meth:`mentions_secret` answer by besides the text (and the fixed patterns).

        Whether redaction is on, and the memory with how much it remembered (it only grows): equal states give
        equal answers, so a digest built at one (a placeholder built ahead) stands while the state is the same.
        """
        return (self.enabled, self.remember and self.memory, self._generation())

    def holds_since(self, state: Hashable, text: str, asked: Iterable[str]) -> bool:
        """Whether :meth:`blank` of ``text`` and :meth:`mentions_secret` of each of ``asked`` answer as at ``state``.

        ``state``: an earlier :meth:`digest_state`. True when it is this one, or when only the memory grew since and
        none of the strings it remembered since occurs in ``text``, in an asked word, or shares a piece of
        :data:`PIECE_CHARS` characters with one (the rules :meth:`mentions_secret` carries its answers by): a digest
        built then from ``text`` is the one built now (issue 22: a placeholder built ahead outlives a secret learned
        from another message, instead of being built again in the masking turn).
        """
        if state == self.digest_state():
            return True
        if not (self.remember and isinstance(state, tuple) and len(state) == 3 and state[0] == self.enabled
                and state[1] is self.memory and isinstance(state[2], int)):
            return False
        learned = self.memory.learned_since(state[2])
        if any(value in text for value in learned):
            return False
        words = "\n".join(asked)  # (a match across two words only costs building the digest again)
        return not any(value in words or any(value[i : i + PIECE_CHARS] in words
                                             for i in range(len(value) - PIECE_CHARS + 1)) for value in learned)

    def mentions_secret(self, text: str) -> bool:
        """Whether ``text`` holds a secret, or shares a piece of :data:`PIECE_CHARS` characters with a remembered one.

        For the words a digest lists from a stored output read before the secret was known: a word that is a piece
        of a secret, or runs into one, would be recognised by nothing once it stands alone.
        """
        if not self.enabled or not text:
            return False
        # A digest asks about the same words output after output and turn after turn (a fifth of a masking turn,
        # issue 22): the answer stands while nothing new is remembered (the patterns never change).
        # A secret learned does not undo the answers before it (issue 22: the masking turn after one asked every word
        # of its digests again): "yes" stands, since the memory only grows; "no" stands when none of the strings
        # learned since occurs in the word or shares a piece with it. Each answer keeps the generation it holds at.
        generation = self._generation()
        known = self._mentioned
        if known is None or known[0] is not self.memory:
            known = self._mentioned = (self.memory, generation, {})
        found = known[2].get(text)
        if found is not None:
            answer, at = found
            if answer or at == generation:
                return answer
            if not _meets_any(text, self.memory.learned_since(at)):
                known[2][text] = (False, generation)
                return False
        answer = bool(self.spans(text)) or (self.remember and self.memory.shares_piece(text))
        if self._generation() == generation and len(text) <= _MENTIONED_MAX_CHARS:  # (it learned nothing itself)
            if len(known[2]) >= _MENTIONED_MAX:
                known[2].clear()
            known[2][text] = (answer, generation)
        return answer

    def scan_words(self, words: Sequence[str]) -> None:
        """Scan ``words`` (the items a digest may list) as :meth:`mentions_secret` will, in bulk, learning nothing.

        The prefilter searches them all at once for what any pattern needs (its triggers, a base64 run): a word
        holding none of it has no finding, and is remembered so; the others are scanned one by one. The read-ahead
        does this for the items of each output's digest material (issue 22: one scan per word was a fifth of it).
        """
        if not self.enabled:
            return
        self.patterns  # noqa: B018 (resolves the patterns and the prefilter)
        scans = self._scans
        fresh = [w for w in dict.fromkeys(words) if w and scans.get(w) is None]
        if not fresh:
            return
        if self._prefilter is None:
            for word in fresh:
                self.scan(word)
            return
        suspects: set[int] = set()
        self._suspect_texts(fresh, suspects, joined=True)  # (short words: one automaton call for all)
        for i, word in enumerate(fresh):
            if i in suspects:
                self.scan(word)
            else:
                scans.put(word, ())  # (no trigger and no need of any pattern: no finding, as _scan would say)

    def safe_cut(self, text: str, at: int, *, keep_head: bool = True) -> int:
        """Where to cut ``text`` near ``at`` so that no secret is split: ``at``, or the edge of the secret there.

        ``keep_head``: the text before the cut is kept (the cut moves back to the secret's start); otherwise the
        text after it (the cut moves on to the secret's end). Only the text around ``at`` is read.
        """
        if not self.enabled or at <= 0 or at >= len(text):
            return at
        offset = max(0, at - _CUT_WINDOW_CHARS)
        window = text[offset : at + _CUT_WINDOW_CHARS]
        for f in self.spans(window):
            start, end = f.start + offset, f.end + offset
            if start < at < end:
                return start if keep_head else end
            if start >= at:
                break
        return at

    # -- structures ---------------------------------------------------------------------------------------------
    def redact_obj(self, obj: Any) -> Any:
        """A deep copy of ``obj`` with every string value redacted (dicts, lists and tuples; keys are kept)."""
        if not self.enabled:
            return obj
        kind = type(obj)
        if kind is str:
            return self.redact_text(obj)
        # (A message's meta and extra are read-only views of dicts: told apart without the ABC's isinstance, which
        # was a tenth of redacting a bulk add's messages.)
        if kind is MappingProxyType or kind is dict:
            return {k: self._redact_item(k, v) for k, v in obj.items()}
        if isinstance(obj, str):
            return self.redact_text(obj)
        if isinstance(obj, Mapping):
            return {k: self._redact_item(k, v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.redact_obj(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self.redact_obj(v) for v in obj)
        return obj

    def _redact_item(self, key: Any, value: Any) -> Any:
        # {"password": "..."}: the key says the whole value is a secret, whatever it looks like.
        if type(value) is str and isinstance(key, str) and not value.startswith("[REDACTED"):
            says = _key_says(key)
            if says is not None:
                from .rules import is_placeholder, weak_value_ok

                name, weak = says
                if not is_placeholder(value, maybe_tag=False) and (weak is None or weak_value_ok(weak, value)):
                    self.learn(value, name)
                    return marker(name)
            return self.redact_text(value)
        if isinstance(key, str) and isinstance(value, str) and not value.startswith("[REDACTED"):
            # (A str subclass: read as the key rule always read it.)
            from .rules import SECRET_KEY, is_placeholder, weak_value_ok

            m = SECRET_KEY.fullmatch(key)
            weak = m.group("weak") if m is not None else None
            if (m is not None and not is_placeholder(value, maybe_tag=False)
                    and (weak is None or weak_value_ok(weak, value))):
                name = "password" if m.group("pw") or m.group("wpw") else "api_key"
                self.learn(value, name)
                return marker(name)
        return self.redact_obj(value)

    def redact_json_string(self, text: str) -> str:
        """A JSON document (tool-call arguments) redacted so that it stays valid JSON.

        The decoded values are redacted first: in the raw text an escaped newline is not whitespace, so a bare
        ``api_key=...`` value would run on into the next line of the string. When the values hold no secret, the
        text pass still catches what only shows in JSON syntax (``"api_key": 12345``), and the original formatting
        is kept.
        """
        if not self.enabled:
            return text
        try:
            decoded = json.loads(text)
        except ValueError:
            return self.redact_text(text)  # not JSON at all: the text pass is all there is
        again = self.redact_obj(decoded)
        if again != decoded:
            return json.dumps(again, ensure_ascii=False)
        out = self.redact_text(text)
        if out is text:
            return out  # (unchanged: it decoded above)
        try:
            json.loads(out)
        except ValueError:
            return json.dumps(again, ensure_ascii=False)  # the text pass cut through an escape sequence
        return out

    def _redact_part(self, part: Part) -> Part:
        if is_opaque(part):
            # A provider's opaque state (signed thinking, encrypted reasoning, a compaction item) goes back to that
            # provider byte for byte or not at all: one changed character fails its signature check (issue 23).
            return part
        if isinstance(part, TextPart):
            return replace(part, text=self.redact_text(part.text), extra=freeze(self.redact_obj(part.extra)))
        if isinstance(part, ThinkingPart):
            # signature / encrypted are opaque provider tokens that must round-trip; only readable text is redacted.
            return replace(part, text=self.redact_text(part.text))
        if isinstance(part, UnknownPart):
            return replace(part, data=freeze(self.redact_obj(part.data)))
        if isinstance(part, DocumentPart):
            # Inline data is binary (base64); a URL can carry credentials, a title (a file name) any text.
            return replace(part, url=self.redact_text(part.url) if part.url else part.url,
                           title=self.redact_text(part.title) if part.title else part.title,
                           extra=freeze(self.redact_obj(part.extra)))
        if isinstance(part, ImagePart):
            return replace(part, url=self.redact_text(part.url) if part.url else part.url,
                           extra=freeze(self.redact_obj(part.extra)))
        return part

    def redact_provider_state(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` (redacted already) with the readable text of a provider's opaque state redacted too.

        For what contextfold stores or hands elsewhere, never the request (see :mod:`._provider_state`): a signed
        thinking block or a reasoning summary that held a secret keeps the redacted text and loses its signature.
        """
        return redact_provider_state(messages, self.redact_text) if self.enabled else list(messages)

    def redact_message(self, m: Message) -> Message:
        """``m`` with secrets redacted in its text, tool-call arguments, meta and extra.

        Each message is redacted once and the result kept (with a callback: every time): asked again, the redactor
        looks in it only for the secrets learned since (see :meth:`_recall`). A secret the message itself teaches is
        redacted wherever the message mentions it, also before the part that taught it.
        """
        if not self.enabled:
            return m
        if self.callback is None:
            known = self._recall(m)
            if known is not None:
                return known
        plain = self.callback is None and not self._learned  # then a message found clean before is clean again
        if plain and self._scans.is_clean(m):
            self._ledger.put(m, m, 0)
            return m
        for _ in range(MAX_PASSES):
            generation = self._generation()
            out = self._redact_fields(m)
            if self._generation() == generation:
                break
        if out == m:
            out = m  # (the same object: a caller may ask whether anything changed by identity)
            if plain and not self._learned:
                self._scans.mark_clean(m)
        if self.callback is None:
            self._ledger.put(m, out, generation)
        return out

    def _redact_fields(self, m: Message) -> Message:
        content: str | tuple[Part, ...] = (
            self.redact_text(m.content) if isinstance(m.content, str) else tuple(map(self._redact_part, m.content))
        )
        calls = tuple(
            ToolCall(c.id, c.name, self.redact_json_string(c.arguments), extra=freeze(self.redact_obj(c.extra)))
            for c in m.tool_calls
        )
        meta, extra = freeze(self.redact_obj(m.meta)), freeze(self.redact_obj(m.extra))
        name = self.redact_text(m.name) if m.name else m.name  # (a participant's name is any text a caller gave)
        return replace(m, content=content, tool_calls=calls, meta=meta, extra=extra, name=name)

    def _generation(self) -> int:
        return self.memory.generation if self.remember else 0

    def _recall(self, m: Message, clean_ids: frozenset[str] = frozenset(),
                key: SameMessage | None = None,
                entry: tuple[Message, Message, int] | None = None) -> Message | None:
        """What ``m`` redacts to, when it was redacted before and no secret learned since occurs in it; else None.

        The result of a redaction depends on the message, the patterns and which remembered strings occur in the
        message's strings; the memory only grows, so when none of the strings learned since occurs, the result
        stands (and is marked as made now). ``key``: ``SameMessage(m)``, when the caller made it; ``entry``: the
        ledger's entry for it, when the caller looked it up.
        """
        if entry is None:
            entry = self._ledger.get(m, key)
            if entry is None:
                return None
        original, out, seen = entry
        now = self._generation()
        if seen != now and mentions_any(m, self.memory.learned_since(seen)):
            return None
        if original is not m:
            transplanted = self._transplant(m, original, out, clean_ids)
            if transplanted is None or self._generation() != now:
                return None  # (its id taught a secret: the whole message is redone, as any message that teaches)
            out = transplanted
        if seen != now:
            self._ledger.put(m, out, now, key)
        elif original is not m:
            # (A copy of a message recorded at this generation: its content's entry stands, it gets its own.)
            self._ledger.put(m, out, now, by_content=False)
        return out

    def _transplant(self, m: Message, original: Message, redacted: Message,
                    clean_ids: frozenset[str] = frozenset()) -> Message | None:
        """``m`` redacted, from ``original``'s redaction: the same but for ``meta["id"]``, redacted here on its own.

        ``clean_ids``: ids known to redact to themselves now (:meth:`_clean_ids`), not scanned again.
        """
        if redacted is not original and redacted == original:
            return None  # (an entry this redactor does not make: redone rather than guessed)
        clean = redacted is original
        if ID_KEY not in m.meta:
            return m if clean else redacted
        own = m.meta[ID_KEY]
        own_redacted = own if own in clean_ids else self._redact_item(ID_KEY, own)
        if clean and own_redacted == own:
            return m
        base = m if clean else redacted
        meta = {key: (own_redacted if key == ID_KEY else base.meta[key]) for key in m.meta}
        return replace(base, meta=freeze(meta))

    def is_clean(self, m: Message) -> bool:
        """Whether :meth:`redact_message` is known to return ``m`` itself now (found clean, nothing learned since)."""
        if not self.enabled or self.callback is not None:
            return False
        known = self._recall(m)
        if known is not None:
            return known is m
        return not self._learned and self._scans.is_clean(m)

    def redact_ahead(self, messages: Iterable[Message], *, paced: bool = True) -> int:
        """Redact ``messages`` (learning their secrets) and keep the results for the transcripts and summaries to come.

        What a session does with each message as it is read (``add()`` past half the soft threshold, the background
        read-ahead while the agent waits for its model): a compaction then finds every message redacted and looks
        only for what was learned since. Paced, it leaves the GIL to other threads between messages; returns how
        many messages were looked at.
        """
        if not self.enabled:
            return 0
        if not paced:
            # All at once (add() of a bulk, in the caller's thread): in bulk, one prefilter pass over the batch
            # instead of every message scanned on its own (it was a fifth of adding 100,000 recorded messages).
            items = list(messages)
            self.redact_messages(items)
            return len(items)
        # In bulk too, a slice of the batch at a time (issue 22: one by one, the first read-ahead of a session, the
        # messages added before half the soft threshold, scanned every text whole; the prefilter clears most).
        pacer = GilPacer()
        done = 0
        chunk: list[Message] = []
        size = 0
        for m in messages:
            chunk.append(m)
            size += len(m.content) if type(m.content) is str else _AHEAD_SLICE_CHARS // 4
            if size >= _AHEAD_SLICE_CHARS:
                self.redact_messages(chunk, kept=False)
                done += len(chunk)
                chunk, size = [], 0
                pacer.tick()
        if chunk:
            self.redact_messages(chunk, kept=False)
            done += len(chunk)
        return done

    def learn_from(self, messages: Iterable[Message]) -> None:
        """Learn every secret the patterns find in ``messages`` (their texts, arguments, meta and extra).

        What a session does before it writes text of its own (a summary, a digest): a value found in context
        anywhere in the session is then known bare everywhere.
        """
        if not self.enabled or not self.remember:
            return
        # A message redacted before was learned from. The others are grouped by what they are copies of (a repeated
        # history's copies are equal but for their ids: see copy_groups), and each group is read once, by content:
        # one message per content not seen before is redacted in bulk and recorded, clean ones too, so that the
        # summarizer's request and the transcript find every message in the ledger, at the generation reached here.
        # The copies come after, once the batch's secrets are known (an entry recalled before a secret is learned
        # would need that secret looked for in it again), needing only their ids read, cleared in bulk. A group whose
        # content redacts to itself records its copies with clean ids as themselves, in bulk (issue 22: a copy was
        # ~10 us of bookkeeping, a second of the first prepare() of 100,000 recorded messages); any other copy is
        # recalled (or redacted) one by one. An entry made stale by the batch's learning is renewed by its group's
        # first copy, and the groups after it with the same entry take the renewed one.
        ledger = self._ledger
        firsts: dict[SameMessage, Message] = {}
        fresh: list[Message] = []
        plan: list[tuple[list[Message], SameMessage, tuple[Message, Message, int] | None, Message | None]] = []
        for group in copy_groups(ledger.unrecorded(messages)):
            head = group[0]
            key = SameMessage(head)
            entry = ledger.by_content(key)  # (not recorded itself: only its content can be)
            if entry is not None:
                plan.append((group, key, entry, None))
                continue
            first = firsts.get(key)
            if first is None:
                firsts[key] = head
                fresh.append(head)
                if len(group) > 1:
                    plan.append((group[1:], key, None, head))
            else:
                plan.append((group, key, None, first))
        del firsts
        if fresh:
            self._learn_fresh(fresh)
        if not plan:
            return
        # (each copy's id, in plan order, read by C loops: 97,000 copies of a repeated history, issue 22)
        all_ids = _ids_of(list(itertools.chain.from_iterable(map(_GROUP_OF, plan))))
        clean_ids = self._clean_ids(all_ids)
        ids_at = self._generation()  # (what clean_ids hold at)
        offset = 0
        renewed: dict[int, tuple[Message, Message, int] | None] = {}  # id(stale entry) -> its first copy's entry
        same: list[Message] = []  # copies that redact to themselves at ids_at, recorded so at the end
        for group, key, entry, first in plan:
            group_ids = all_ids[offset : offset + len(group)]
            offset += len(group)
            if first is not None:
                entry = ledger.get(first)
            rest: Sequence[Message] = group
            if entry is not None and entry[2] != self._generation():
                stale = entry
                entry = renewed.get(id(stale), stale)  # (renewed by an earlier copy: its entry is current)
                if entry is None or entry[2] != self._generation():
                    head, rest, group_ids = group[0], group[1:], group_ids[1:]
                    self._learn_copy(head, key, entry, clean_ids, ids_at)
                    entry = ledger.get(head)  # (its own entry, found by the object)
                    renewed.setdefault(id(stale), entry)
            if entry is not None and entry[2] == ids_at and entry[1] is entry[0]:
                # Its content redacts to itself at ids_at: so does a copy whose id is clean (most of a repeated
                # history; recorded without the general path's checks). Recorded at ids_at, that stays true when a
                # copy's id teaches a secret meanwhile (later uses then look for it).
                redacted = entry[0]
                root = rest[0]._origin if rest else None
                if root is not None:  # (copies given only an id: one entry for them all, see Ledger.put_copies)
                    ledger.put_copies(root, ids_at, clean_ids)
                    if clean_ids.issuperset(group_ids) and not _holds_itself(rest, redacted):
                        continue  # (each one recorded so: the ids asked at C speed, issue 22)
                    for m in rest:
                        if m is redacted or m.meta.get(ID_KEY) not in clean_ids:
                            self._learn_copy(m, key, entry, clean_ids, ids_at)
                    continue
                for m in rest:
                    own = m.meta.get(ID_KEY, _NO_ID)
                    if m is not redacted and (own is _NO_ID or own in clean_ids):
                        same.append(m)
                    else:
                        self._learn_copy(m, key, entry, clean_ids, ids_at)
            else:
                for m in rest:
                    self._learn_copy(m, key, entry, clean_ids, ids_at)
        ledger.put_same(same, ids_at)

    def _learn_copy(self, m: Message, key: SameMessage, entry: tuple[Message, Message, int] | None,
                    clean_ids: frozenset[str], ids_at: int) -> None:
        """Learn from ``m``, a copy of the message of ``entry`` (``key``: its content): recalled, or redacted."""
        ids = clean_ids if self._generation() == ids_at else frozenset()  # (an id may hold a secret learned since)
        if self._recall(m, ids, key, entry) is None:
            self.redact_message(m)

    def _learn_fresh(self, items: list[Message]) -> None:
        """Learn from messages of content not seen before: redact those the prefilter cannot clear, record the rest.

        A message the prefilter clears holds nothing a pattern finds; recorded as clean when no remembered string
        occurs in it either (one search of the batch; else redacted), its copies and later redactions need not read
        it. (Redacting every message of the batch for the record, a secret learned late redone everywhere, cost a
        quarter more when the messages are all distinct.)
        """
        found = self._suspects(items)
        if found is None:
            for m in items:
                self.redact_message(m)  # (learning is what redacting a message does on the way)
            return
        suspects, texts = found
        start = self._generation()
        for i in sorted(suspects):
            self.redact_message(items[i])
        if self._generation() != start:
            for i in sorted(suspects):  # (one redacted before a secret was learned is redone if it mentions it)
                self.redact_message(items[i])
        clear = [i for i in range(len(items)) if i not in suspects]
        generation = self._generation()
        remembered = self._remembered_of(items, texts, clear)
        if remembered is None:
            return  # (too many strings remembered to search the batch: redacted when first asked)
        for k, i in enumerate(clear):
            if k in remembered:
                self.redact_message(items[i])  # (a remembered string in it: summary and transcript need it redacted)
            else:
                self._ledger.put(items[i], items[i], generation)

    def _clean_ids(self, ids: list[Any]) -> frozenset[str]:
        """Of ``ids`` (``meta["id"]`` values), the strings the prefilter shows redact to themselves, learning nothing.

        Such an id holds no pattern's trigger or need (so no pattern finds anything in it), no remembered string,
        and its key does not name a secret (see :meth:`_redact_item`).
        """
        distinct = dict.fromkeys(ids)
        distinct.pop("", None)
        # (strings, as ids are: kept as they are, checked in one C loop)
        texts = list(distinct) if set(map(type, distinct)) <= {str} else \
            [text for text in distinct if isinstance(text, str) and text]
        self.patterns  # noqa: B018 (resolves the patterns and the prefilter)
        if len(texts) < 2 or self._prefilter is None or self.callback is not None:
            return frozenset()
        from .rules import SECRET_KEY

        if SECRET_KEY.fullmatch(ID_KEY):
            return frozenset()
        suspects: set[int] = set()
        whole = (SEPARATOR.join(texts), _starts(texts))  # (searched for the triggers, then for what is remembered)
        self._suspect_texts(texts, suspects, joined=True, whole=whole)
        if self.remember:
            remembered = self._remembered_in(texts, whole)
            if remembered is None:  # (too many remembered strings to look for each in the joined ids)
                remembered = {i for i, text in enumerate(texts) if i not in suspects and self.memory.spans(text)}
            suspects |= remembered
        # (The ids are distinct: the clean ones are all but the suspects'. 100,000 ids of a bulk add, issue 22.)
        return frozenset(texts).difference([texts[i] for i in suspects]) if suspects else frozenset(texts)

    def redact_messages(self, messages: Iterable[Message], *, kept: bool = True) -> list[Message]:
        """Every message redacted, in bulk: first every secret of the batch is learned, then each is redacted.

        The same as :meth:`learn_from` the batch, then :meth:`redact_message` one by one: a value found in context
        late in the batch is redacted where an earlier message mentions it bare. A prefilter searches all the
        messages' text at once for what any pattern needs (its trigger substrings, a base64 run) and, once the batch
        is learned, for what is remembered; a message with none of it comes back as it is, unscanned.
        ``kept=False``: neither take nor leave the batch the ledger keeps for the next call (the read-ahead's slices,
        on another thread, between a compaction's two batches).
        """
        items = list(messages)
        if not self.enabled:
            return items
        if self.callback is not None:
            return self._redact_batch(items)
        # Messages redacted before come back from the ledger; the others are redacted in bulk, then recorded.
        start = self._generation()
        out, fresh = self._known(items, start, kept=kept)
        if fresh:
            for i, redacted in zip(fresh, self._redact_batch([items[i] for i in fresh]), strict=True):
                out[i] = redacted
        for _ in range(MAX_PASSES):
            if self._generation() == start:
                break
            # A secret learned on the way may be mentioned in a message redacted before it: each is checked for
            # the strings learned since, and redone only where one occurs.
            start = self._generation()
            out = [self.redact_message(m) for m in items]
        result = cast("list[Message]", out)  # (each one known, redacted in the batch, or redone)
        if kept and self._generation() == start:
            self._ledger.keep_batch(items, tuple(result), start)  # (a copy: the caller may change its list)
        return result

    def _known(self, items: list[Message], generation: int, *,
               kept: bool = True) -> tuple[list[Message | None], list[int]]:
        """What each of ``items`` redacts to, from the last batch (``kept``) or the ledger; the indexes not known."""
        batch = self._ledger.from_batch(items, generation) if kept else None
        out: list[Message | None]
        missing: Sequence[int]
        if batch is not None:
            out, missing = batch
        else:
            out, missing = [None] * len(items), range(len(items))
        if not missing:
            return out, []
        rest = items if batch is None else [items[i] for i in missing]
        stale: list[tuple[int, Message, tuple[Message, Message, int]]] = []
        others: list[tuple[int, Message]] = []
        for i, m, known in zip(missing, rest, self._ledger.current(rest, generation), strict=True):
            if known is not None:
                out[i] = known
                continue
            entry = self._ledger.own_entry(m)
            if entry is not None and entry[0] is m:
                stale.append((i, m, entry))  # (its own entry, made before something was learned)
            else:
                others.append((i, m))
        if stale:
            for (i, m, _), renewed in zip(stale, self._renewed([(m, entry) for _, m, entry in stale]), strict=True):
                if renewed is None:
                    others.append((i, m))  # (a string learned since may occur in it: as any message, below)
                else:
                    out[i] = renewed
            others.sort(key=operator.itemgetter(0))
        fresh: list[int] = []
        for i, m in others:
            found = self._recall(m)
            out[i] = found
            if found is None:
                fresh.append(i)
        return out, fresh

    def _renewed(self, stale: list[tuple[Message, tuple[Message, Message, int]]]) -> list[Message | None]:
        """What each message redacts to now, from its own ``entry`` made at an earlier generation (or None).

        None where a string learned since may occur in it (then :meth:`_recall` looks at it on its own). As
        :meth:`_recall` does message by message, with one search per earlier generation of the strings learned
        since in all the messages' texts (issue 22: the 3,000 messages add() redacted were re-checked one by one in
        the first compaction of 100,000 recorded messages, after its catch-up learned two strings).
        """
        now = self._generation()
        out: list[Message | None] = [None] * len(stale)
        by_seen: dict[int, list[int]] = {}
        for k, (_, entry) in enumerate(stale):
            by_seen.setdefault(entry[2], []).append(k)
        renewed: list[tuple[Message, Message]] = []
        for seen, indexes in by_seen.items():
            learned = self.memory.learned_since(seen) if self.remember else []
            readable: list[int] = []
            texts: list[str] = []
            for k in indexes:
                strings = surface(stale[k][0])
                if strings is not None:  # (else unsure: looked at on its own)
                    readable.append(k)
                    texts.append(SEPARATOR.join(strings))
            holding: set[int] = set()
            if learned and texts:
                self._search(SEPARATOR.join(texts), _starts(texts), learned, holding)
            for n, k in enumerate(readable):
                if n not in holding:
                    m, entry = stale[k]
                    out[k] = entry[1]
                    renewed.append((m, entry[1]))
        self._ledger.renew(renewed, now)
        return out

    def _redact_batch(self, items: list[Message]) -> list[Message]:
        """:meth:`redact_messages` of messages not redacted before: learn the batch, then redact, prefiltered."""
        found = self._suspects(items)
        if found is None:
            if self.remember:
                for m in items:
                    self.redact_message(m)
            return [self.redact_message(m) for m in items]
        suspects, texts = found
        before = self._learned
        done = {i: self.redact_message(items[i]) for i in sorted(suspects)}
        if self._learned is not before:
            done = {}  # (a secret learned on the way may be mentioned in a message redacted before it)
        generation = self._generation()
        remembered = self._remembered_of(items, texts, range(len(items)))
        if remembered is None:
            return [done[i] if i in done else self.redact_message(m) for i, m in enumerate(items)]
        suspects |= remembered
        out: list[Message] = []
        scans = self._scans
        # (A turn's batch, not a long history's transcript: its outputs are not blanked for digests after.)
        remember_cleared = len(items) <= _REMEMBER_CLEARED_MAX_BATCH
        for i, m in enumerate(items):
            if i in done:
                out.append(done[i])
            elif i in suspects:
                out.append(self.redact_message(m))
            else:
                out.append(m)  # (no trigger, nothing remembered in it: clean at this generation)
                if self.callback is None:
                    self._ledger.put(m, m, generation)
                if remember_cleared and m.role == "tool" and isinstance(m.content, str) and m.content:
                    # Its text holds no trigger and nothing any pattern needs: no finding, as _scan would say (and
                    # scan_words records for words). A digest's blanking of the output then finds it scanned
                    # (issue 22: the read-ahead scanned again the outputs add() had cleared in bulk).
                    scans.put(m.content, ())
        return out

    def _suspects(self, items: list[Message]) -> tuple[set[int], list[str | None]] | None:
        """The messages the patterns' prefilter cannot clear, with the texts it searched; None when it cannot work.

        Texts are each message's strings joined, in order (what :meth:`_remembered_of` searches next); None for a
        message whose arguments were decoded: those strings are made again then, not held for the whole batch. The
        texts are lowered and searched :data:`_PREFILTER_CHUNK_CHARS` at a time.
        """
        self.patterns  # noqa: B018 (resolves the patterns and the prefilter)
        if self._prefilter is None or self.callback is not None:
            return None
        suspects: set[int] = set()
        texts: list[str | None] = []
        chunk: list[str] = []
        chunk_chars = 0
        for i, m in enumerate(items):
            strings, decoded = read_surface(m)
            if strings is None:
                suspects.add(i)
                strings = []
            text = SEPARATOR.join(strings)
            texts.append(None if decoded else text)
            chunk.append(text)
            chunk_chars += len(text)
            if chunk_chars >= _PREFILTER_CHUNK_CHARS:
                self._suspect_chunk(chunk, i + 1 - len(chunk), suspects)
                chunk, chunk_chars = [], 0
        if chunk:
            self._suspect_chunk(chunk, len(items) - len(chunk), suspects)
        return suspects, texts

    def _suspect_chunk(self, texts: list[str], offset: int, suspects: set[int]) -> None:
        """:meth:`_suspect_texts` of a batch's ``texts`` from index ``offset`` on."""
        if not offset:
            self._suspect_texts(texts, suspects)
            return
        found = {i - offset for i in suspects if i >= offset}
        self._suspect_texts(texts, found)
        suspects.update(offset + k for k in found)

    def _remembered_of(self, items: list[Message], texts: list[str | None], indexes: Sequence[int]) -> set[int] | None:
        """:meth:`_remembered_in` of the texts :meth:`_suspects` gave for ``items[i]``, ``i`` in ``indexes``.

        The positions in ``indexes`` of those holding a remembered string; searched :data:`_PREFILTER_CHUNK_CHARS`
        at a time, a text not kept made again.
        """
        if not self._learned or not indexes:
            return set()
        holding: set[int] = set()
        chunk: list[str] = []
        chunk_chars = 0
        for k, i in enumerate(indexes):
            text = texts[i]
            if text is None:
                text = SEPARATOR.join(surface(items[i]) or ())
            chunk.append(text)
            chunk_chars += len(text)
            if chunk_chars >= _PREFILTER_CHUNK_CHARS or k + 1 == len(indexes):
                found = self._remembered_in(chunk)
                if found is None:
                    return None
                offset = k + 1 - len(chunk)
                holding.update(offset + n for n in found)
                chunk, chunk_chars = [], 0
        return holding

    def _suspect_texts(self, texts: list[str], suspects: set[int], *, joined: bool = False,
                       whole: tuple[str, list[int]] | None = None) -> None:
        """Add to ``suspects`` the index of every text holding a pattern's trigger or need (the prefilter's search).

        ``joined``: the texts are short (ids): the automaton reads them joined, in one call. ``whole``: the texts
        joined and their :func:`_starts`, when the caller has them.
        """
        assert self._prefilter is not None
        needles, needs = self._prefilter
        given, suspects = suspects, set(suspects)  # (the texts this search finds are looked at again, below)
        lowered: list[str] | None = None
        joined_text = (SEPARATOR.join(texts) if whole is None else whole[0]) if joined else ""
        if joined and joined_text.isascii():
            # (Many short texts, ASCII: lower-cased in one call, which keeps every length, so the same starts.)
            joined_text = joined_text.lower()
            starts = _starts(texts) if whole is None else whole[1]
        else:
            lowered = [t.lower() for t in texts]  # (one by one: lower-casing may change a text's length)
            starts = _starts(lowered)
            # (Texts read one by one are joined below only where a search needs it: a copy of the whole chunk.)
            joined_text = SEPARATOR.join(lowered) if joined else ""
        finder = self._triggers
        positions = finder.positions(joined_text) if joined else None
        if positions is not None:
            suspects.update(bisect.bisect_right(starts, at) - 1 for at in positions)
        elif finder.one_pass:  # (one pass per text; the matches of a text that holds many are not all wanted)
            lowered = lowered or [t.lower() for t in texts]
            suspects.update(i for i, text in enumerate(lowered) if i not in suspects and finder.holds_any(text))
        else:
            joined_text = joined_text or SEPARATOR.join(lowered or ())
            self._search(joined_text, starts, needles, suspects)
        for need in needs:
            runs = class_runs(need)
            if runs is not None:  # (a class run: each text not yet suspect, at C speed; see contextfold.redact._runs)
                if joined and not runs.holds(joined_text):
                    continue  # (no run crosses the separator: none in the whole, none in any of the short texts)
                lowered = lowered or [t.lower() for t in texts]
                suspects.update(i for i, text in enumerate(lowered) if i not in suspects and runs.holds(text))
                continue
            joined_text = joined_text or SEPARATOR.join(lowered or ())
            for hit in need.finditer(joined_text):
                suspects.add(bisect.bisect_right(starts, hit.start()) - 1)
        # A trigger is short and common, a base64 run any long path: each text found is looked at again, and
        # cleared when no pattern it could set off can match in it (issue 22; a necessary condition, see ._gate).
        gate = self._gate
        for i in suspects - given:
            text = texts[i]
            if gate.may_hold(text, lowered[i] if lowered is not None else text.lower()):
                given.add(i)

    def _remembered_in(self, texts: list[str], whole: tuple[str, list[int]] | None = None) -> set[int] | None:
        """Indexes of the texts holding a remembered secret, or None when too many are remembered to search.

        ``whole``: the texts joined and their :func:`_starts`, when the caller has them.
        """
        learned = self._learned
        if not learned or not texts:
            return set()
        if len(learned) > _PREFILTER_MAX_LEARNED:
            return None
        joined, starts = (SEPARATOR.join(texts), _starts(texts)) if whole is None else whole
        holding: set[int] = set()
        self._search(joined, starts, tuple(learned), holding)
        return holding

    @staticmethod
    def _search(joined: str, starts: list[int], needles: Iterable[str], suspects: set[int]) -> None:
        """Add to ``suspects`` the index of every text of ``joined`` (which begin at ``starts``) holding a needle."""
        count = len(starts)
        for needle in needles:
            at = joined.find(needle)
            while at >= 0:
                index = bisect.bisect_right(starts, at) - 1
                suspects.add(index)
                if index + 1 >= count:
                    break
                at = joined.find(needle, starts[index + 1])


# What the key rule says of a mapping key: (the secret's kind, the weak key matched or None), None for a key that
# names no secret. Keys repeat (every message's meta has the same few): asked once each, up to this many.
_KEY_SAYS: dict[str, tuple[str, str | None] | None] = {}
_KEY_SAYS_MAX = 4096


def _key_says(key: str) -> tuple[str, str | None] | None:
    """What :data:`~contextfold.redact.rules.SECRET_KEY` says of ``key`` (see ``Redactor._redact_item``)."""
    try:
        return _KEY_SAYS[key]
    except KeyError:
        pass
    from .rules import SECRET_KEY

    m = SECRET_KEY.fullmatch(key)
    says = None if m is None else ("password" if m.group("pw") or m.group("wpw") else "api_key", m.group("weak"))
    if len(key) <= _PLAIN_MAX_CHARS:  # (a key is a name: a long one is asked again, not kept)
        if len(_KEY_SAYS) >= _KEY_SAYS_MAX:
            _KEY_SAYS.clear()
        _KEY_SAYS[key] = says
    return says


# (What learn_from reads of each copy, and each plan step's group, at C speed.)
_META_OF = operator.attrgetter("meta")
_ID_ITEM = operator.itemgetter(ID_KEY)
_GROUP_OF = operator.itemgetter(0)


def _ids_of(messages: list[Message]) -> list[Any]:
    """Each message's ``meta["id"]`` (None without one), by C loops when every message has one (as a manager's do)."""
    try:
        return list(map(_ID_ITEM, map(_META_OF, messages)))
    except KeyError:
        return [m.meta.get(ID_KEY) for m in messages]


def _holds_itself(items: Sequence[object], x: object) -> bool:
    """Whether ``x`` itself (not an equal message) is one of ``items``, at C speed."""
    return any(map(operator.is_, items, itertools.repeat(x)))


def _starts(texts: list[str]) -> list[int]:
    """Where each of ``texts`` starts in ``SEPARATOR.join(texts)`` (C loops: 100,000 ids of a bulk add, issue 22)."""
    return list(map(operator.add, itertools.accumulate(map(len, texts), initial=0), range(len(texts))))


def _meets_any(text: str, remembered: Sequence[str]) -> bool:
    """Whether one of ``remembered`` occurs in ``text`` or shares a piece of ``PIECE_CHARS`` characters with it."""
    if not remembered:
        return False
    pieces = {text[i : i + PIECE_CHARS] for i in range(len(text) - PIECE_CHARS + 1)}
    for value in remembered:
        if value in text:
            return True
        if pieces and any(value[i : i + PIECE_CHARS] in pieces for i in range(len(value) - PIECE_CHARS + 1)):
            return True
    return False
