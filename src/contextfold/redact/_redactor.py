"""Secret redaction, applied to everything before it leaves the process (events, archives, logs).

Each :class:`SecretPattern` finds one kind of secret; only the secret itself is replaced (``password=hunter2``
becomes ``password=[REDACTED:password]``), so the text around it is byte-for-byte unchanged and a redacted log
still reads naturally. All patterns are matched against the original text and overlapping findings are resolved
before anything is replaced, so one replacement can never create or hide another match.

What the model sees is not redacted unless the configuration asks for it: the agent may legitimately need a
token it was given. Redaction protects what is exported and archived.

This module redacts text and JSON-like structures (and a message's fields), and learns what it redacts; the patterns'
search of a text (or of many at once) is :mod:`._scanner`'s, which every :class:`Redactor` builds on first use.
Messages as such, one by one or in bulk, go through the ledger of what each redacted to in :mod:`._messages`, which
every :class:`Redactor` holds. A mapping's items go through the key rule of :mod:`._key_rule` (a key naming a secret
makes its whole value one).
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import operator
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._exact import EXACT_LEAVES, exact_leaf, exact_text
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
from ._callback import CallbackMemo
from ._key_rule import redact_item
from ._ledger import CLEARED_MAX_CHARS
from ._messages import MessageRedactor
from ._provider_state import redact_provider_state
from ._scanner import Scanner
from ._scans import MARKER_RE, Finding, marker
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

# Kinds of personal data (contextfold.redact._personal): redacted where asked, never remembered as secrets.
_PERSONAL_KINDS = frozenset({"email", "phone", "card_number"})
# What is remembered when remembering is off: nothing, the same object every time.
_NOTHING: Mapping[str, str] = MappingProxyType({})

# Where personal data (e-mail addresses, phone and card numbers) is redacted too: "telemetry" (the default: what
# exporters send out of the process), "everywhere" (the archive as well), "nowhere".
PERSONAL_DATA_CHOICES = ("telemetry", "everywhere", "nowhere")
# A text is cut around its secrets within this distance of the cut (more than any secret is long).
_CUT_WINDOW_CHARS = 8192
# mentions_secret remembers its answers for this many words at most, each this long at most (digest items).
_MENTIONED_MAX = 8_192
_MENTIONED_MAX_CHARS = 256


# redact_text remembers the strings up to CLEARED_MAX_CHARS long found clean, this many characters of them at most (per
# memory generation; with a set's slot and a string's header, ~8 MB for short strings at the cap).
_PLAIN_BUDGET_CHARS = 1 << 20
# A list or tuple of at least this many strings is cleared in bulk before its strings are redacted one by one
# (see Redactor.clearing): the event of a compaction names every message it removed, 100,000 ids.
_CLEAR_IN_BULK_MIN = 64
# Strings cleared at one generation are taken at a later one after a search for each string learned since, when at
# most this many were.
_CLEARED_RECHECK_MAX = 64

# A remembered value this long, all in the base64 alphabet, is also remembered decoded when that is readable text.
_ENCODED_MIN_CHARS = 8
_BASE64_RE = re.compile(r"[A-Za-z0-9+/]+={0,2}")

# Values whose text never holds a secret, kept as they are by redaction (numbers and times; see _redact_other).
_TEXTLESS = (int, float, complex, datetime.date, datetime.time, datetime.timedelta)
# Those exact types: a subclass's text is its own (an IntEnum whose __str__ or __format__ says what it stands for),
# read as another object's (see Redactor._shown_redacted).
_TEXTLESS_TYPES = frozenset({int, float, complex, bool, datetime.date, datetime.datetime, datetime.time,
                             datetime.timedelta})

# The types whose subclasses redact_obj reads as their exact type (contextfold._exact.exact_leaf).
_EXACT_BASES = (str, int, float)


def _value_text(obj: Any) -> str | None:
    """The text of ``obj``'s value as its exact type writes it (``obj``: a number, time or string of a subclass)."""
    for base in type(obj).__mro__:
        if base is str or base in _TEXTLESS_TYPES:
            text: str = base.__dict__["__repr__" if base in (int, float, complex, bool) else "__str__"](obj)
            return text
    return None


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
        self._compiled: Scanner | None = None
        self.enabled = enabled
        self.callback = callback
        self._called = CallbackMemo(callback) if callback is not None else None  # (shared by for_session's twins)
        self.apply_to_model = apply_to_model
        self.remember = remember
        self.memory = memory if memory is not None else SecretMemory()
        self.personal_data = personal_data
        self._with_personal = personal_data == "everywhere"
        # The messages it redacted, and how (see ._messages: redact_message(s), learn_from, redact_ahead).
        self._message_redactor = MessageRedactor(self)
        # mentions_secret's answers, valid at one generation of the memory (see there); each copy starts its own
        # (the memory, its generation then, each word asked -> (its answer, the generation it holds at))
        self._mentioned: tuple[SecretMemory, int, dict[str, tuple[bool, int]]] | None = None
        # redact_text's short strings found clean: (id of the redactor, its memory, the generation, the strings)
        self._plain: tuple[int, SecretMemory, int, set[str], list[int]] | None = None  # (+ the characters held)
        # Short strings a batch's prefilter cleared before they are redacted one by one (see clearing), per thread
        # (the telemetry thread clears its events' strings while the agent's thread clears a batch's, issue 22):
        # ``.now`` is (id of the redactor, its memory, the generation they were cleared at, the strings)
        self._clearings = threading.local()

    # -- copies sharing what they can ---------------------------------------------------------------------------
    def for_session(self, memory: SecretMemory) -> Redactor:
        """This redactor (same patterns, same settings, shared scans) remembering into ``memory``.

        What a manager does with the redactor it is given: the secrets of a session are the session's, even when
        one configured redactor is handed to many managers.
        """
        twin = copy.copy(self)
        twin.memory = memory
        twin._message_redactor = MessageRedactor(twin)  # (what it redacted depends on the memory)
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
        twin._compiled = None  # (compiled again, with the personal-data patterns)
        twin._message_redactor = MessageRedactor(twin)
        twin._mentioned = None
        return twin

    @property
    def patterns(self) -> tuple[SecretPattern, ...]:
        """The patterns in use: the user's first (for an identical span, their name is shown), then the built-ins."""
        return self._scanner.patterns

    @property
    def _scanner(self) -> Scanner:
        """The patterns compiled for search (see ._scanner), on first use: the built-ins are compiled then."""
        scanner = self._compiled
        if scanner is None:
            chosen: list[SecretPattern] = []
            if self._builtin:
                from .rules import BUILTIN_PATTERNS

                chosen = [p for p in BUILTIN_PATTERNS if p.name not in self._skip]
            if self._with_personal:
                from ._personal import PERSONAL_PATTERNS

                chosen.extend(PERSONAL_PATTERNS)
            scanner = self._compiled = Scanner((*self._user_patterns, *chosen))
        return scanner

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
        return list(self._scanner.findings(text))

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
            if f.start >= last_end and not MARKER_RE.fullmatch(text, f.start, f.end):
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
        shadow._message_redactor = MessageRedactor(shadow)
        shadow._mentioned = None
        return shadow.redact_ahead(messages, paced=paced)

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced by its marker; the rest is unchanged.

        A ``str`` of a subclass is read (and returned) as its exact value: its own ``__eq__``, ``__hash__`` or
        ``__contains__`` could tell the cache below it was a text found clean (see :mod:`contextfold._exact`).
        """
        if not self.enabled:
            return text
        if type(text) is not str:
            if not isinstance(text, str):
                return text  # (no text at all: None, as before)
            text = exact_text(text)
        if not text:
            return text
        plain = self._plain_strings() if len(text) <= CLEARED_MAX_CHARS else None
        if plain is not None and (text in plain or self._was_cleared(text)):
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

    def _was_cleared(self, text: str) -> bool:
        """Whether ``text`` is one of the strings :meth:`clearing` cleared, and redacts to itself now."""
        cleared: tuple[int, SecretMemory, int, frozenset[str]] | None = getattr(self._clearings, "now", None)
        if cleared is None or text not in cleared[3] or cleared[0] != id(self) or cleared[1] is not self.memory:
            return False
        at = cleared[2]
        if at == self._generation():
            return True
        # (Clean then; what the memory finds has changed since only by the strings learned since, the patterns never.)
        learned = self.memory.learned_since(at) if self.remember else []
        return len(learned) <= _CLEARED_RECHECK_MAX and not any(s in text for s in learned)

    @contextlib.contextmanager
    def clearing(self, texts: Iterable[str]) -> Iterator[None]:
        """Within the block, :meth:`redact_text` returns those of ``texts`` the prefilter clears now without a scan.

        One prefilter pass over many short strings (a batch's ids, meta values and arguments, an event's list of
        ids) instead of a scan of each, cold (~9 us a string: the patterns without a trigger, the scan cache, the
        memory; issue 22: a tenth of a cold compaction, and a second of the telemetry thread's after the first
        compaction of 100,000 messages). Such a string redacts to itself at the generation it was cleared at, and
        later when none of the strings learned since occurs in it. Nothing is kept after the block.
        """
        # The generation is read before the strings are searched: a secret another thread learns meanwhile then
        # leaves the set older than the memory, and each cleared string is checked for it (see _was_cleared).
        # (Read after, the set looked current and a string holding that secret went out bare.)
        generation = self._generation()
        clean = self._message_redactor.clean_strings(texts)
        if not clean:
            yield
            return
        clearings = self._clearings
        before = getattr(clearings, "now", None)  # (a clearing of a copy of this redactor, which shares the local)
        clearings.now = (id(self), self.memory, generation, clean)
        try:
            yield
        finally:
            clearings.now = before

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
        scanner = self._scanner
        scans = scanner.scans
        fresh = [w for w in dict.fromkeys(words) if w and scans.get(w) is None]
        if not fresh:
            return
        if scanner.prefilter is None:
            for word in fresh:
                scanner.findings(word)
            return
        suspects: set[int] = set()
        scanner.suspect_texts(fresh, suspects, joined=True)  # (short words: one automaton call for all)
        for i, word in enumerate(fresh):
            if i in suspects:
                scanner.findings(word)
            else:
                scans.put(word, ())  # (no trigger and no need of any pattern: no finding, as a scan would say)

    def clean_words(self, words: Sequence[str]) -> set[str]:
        """Those of ``words`` :meth:`mentions_secret` says no to now, found in bulk instead of asked one by one.

        The prefilter reads the words not answered yet all at once (as :meth:`scan_words` does): one it clears has no
        finding, and is clean when no remembered string occurs in it nor shares a piece with it. Their answers are
        remembered as :meth:`mentions_secret` remembers its own; a word the prefilter does not clear is neither
        scanned nor answered (ask :meth:`mentions_secret`, which scans it). Learns nothing. The read-ahead asks this
        of each digest's next candidates (issue 22: a scan and an answer per word, ~18 us, were a seventh of it).
        """
        if not self.enabled:
            return set(words)
        scanner = self._scanner
        if scanner.prefilter is None:
            return set()
        generation = self._generation()
        known = self._mentioned
        if known is None or known[0] is not self.memory:
            known = self._mentioned = (self.memory, generation, {})
        answers = known[2]
        clean: set[str] = set()
        fresh: list[str] = []
        for word in dict.fromkeys(words):
            found = answers.get(word)
            if found is None:
                if word:
                    fresh.append(word)
                else:
                    clean.add(word)
            elif not found[0] and found[1] == generation:
                clean.add(word)
        if not fresh:
            return clean
        suspects: set[int] = set()
        scanner.suspect_texts(fresh, suspects, joined=True)  # (short words: one automaton call for all)
        memory = self.memory if generation else None
        for i, word in enumerate(fresh):
            if i in suspects or (memory is not None and (memory.shares_piece(word) or memory.spans(word))):
                continue
            clean.add(word)
            if len(word) <= _MENTIONED_MAX_CHARS:
                if len(answers) >= _MENTIONED_MAX:
                    answers.clear()
                answers[word] = (False, generation)
        return clean

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
        """A deep copy of ``obj`` with every string value redacted (dicts, lists, tuples and sets; keys are kept).

        A ``str``, ``int`` or ``float`` of a subclass comes back as its exact type (its value, what JSON writes of
        it), redacted: its own methods are never called, so none can show or hide a secret (see
        :mod:`contextfold._exact`). Containers and the rest are told by their type, never ``isinstance`` (an
        object's ``__class__`` property can claim ``str``: it made redaction raise). Another object (but a number
        or a time) whose text holds a secret is replaced by that text redacted.
        """
        if not self.enabled:
            return obj
        kind = type(obj)
        if kind is str:
            return self.redact_text(obj)
        # (A message's meta and extra are read-only views of dicts: told apart without the ABC's isinstance, which
        # was a tenth of redacting a bulk add's messages.)
        if kind is MappingProxyType or kind is dict:
            return {k: self._redact_item(k, v) for k, v in obj.items()}
        if obj is None or kind is int or kind is float or kind is bool:
            return obj  # (an event's figures: before the ABC checks below, each of its numbers went through them)
        if kind in _TEXTLESS_TYPES:
            return obj
        if issubclass(kind, _EXACT_BASES):  # (a subclass: its exact value, redacted; see contextfold._exact)
            return self.redact_obj(exact_leaf(obj))
        if issubclass(kind, Mapping):
            return {k: self._redact_item(k, v) for k, v in obj.items()}
        if issubclass(kind, list | tuple):
            if len(obj) >= _CLEAR_IN_BULK_MIN and _clearing_of(self) is None:
                with self.clearing([v for v in obj if type(v) is str and len(v) <= CLEARED_MAX_CHARS]):
                    return self._redact_sequence(obj)
            return self._redact_sequence(obj)
        if issubclass(kind, _TEXTLESS):
            return self._shown_redacted(obj)
        return self._redact_other(obj)

    def _shown_redacted(self, obj: Any) -> Any:
        """``obj`` (a time or a complex number of a subclass), or the text it shows redacted when that holds a secret.

        What a transcript writes of it is its ``__str__`` (``serialize._unknown``), and a sink that formats an event
        writes its ``__format__``, which a subclass defines as it likes: a secret in either passed telemetry
        redaction in clear (sixteenth stop's "left out"). Replaced by that text redacted. Only a text other than its
        value's own is read; the texts are read as exact ``str`` (a ``__str__`` returning a ``str`` subclass whose
        ``__ne__`` lies is compared by its value). Strings and numbers of a subclass never come here: they are
        redacted as their exact type (:func:`contextfold._exact.exact_leaf`).
        """
        try:
            plain = _value_text(obj)
        except Exception:  # (an int past Python's digit limit for text: no text of its value; its shown ones are read)
            plain = None
        shown: list[str] = []
        for show in (str, format):
            try:
                shown.append(exact_text(show(obj)))
            except Exception:  # (a text that fails to show shows nothing)
                continue
        for text in dict.fromkeys(shown):
            if text != plain:
                redacted = self.redact_text(text)
                if redacted != text:
                    return redacted
        return obj

    def _redact_other(self, obj: Any) -> Any:
        """``obj`` (no str, mapping, list or tuple) redacted: a set's members; another object by its text.

        What a transcript writes of such a value of a caller's meta is its text (a set: its members, see
        ``serialize._unknown``): a credential in a tag set or in an object's text reached the archive in clear once
        it was written (red team 17). An object whose text holds no secret is kept as it is.
        """
        kind = type(obj)
        if issubclass(kind, set | frozenset):
            members = [self.redact_obj(v) for v in obj]
            if (kind is set or kind is frozenset) and all(map(operator.is_, members, obj)):
                return obj  # (a subclass is copied: what its iteration gave is what is written)
            return frozenset(members) if issubclass(kind, frozenset) else set(members)
        try:
            text = exact_text(str(obj))
        except Exception:  # (written by its type's name: nothing of it to redact)
            return obj
        redacted = self.redact_text(text)
        return obj if redacted == text else redacted

    def _redact_sequence(self, obj: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
        if isinstance(obj, list):
            return [self.redact_obj(v) for v in obj]
        return tuple(self.redact_obj(v) for v in obj)

    # What redact_obj does with each item of a mapping: the key rule (see ._key_rule), bound here as a method (no
    # call in between: every meta and extra item of every message goes through it).
    _redact_item = redact_item

    def redact_json_string(self, text: str) -> str:
        """A JSON document (tool-call arguments) redacted so that it stays valid JSON.

        The decoded values are redacted first: in the raw text an escaped newline is not whitespace, so a bare
        ``api_key=...`` value would run on into the next line of the string. When the values hold no secret, the
        text pass still catches what only shows in JSON syntax (``"api_key": 12345``), and the original formatting
        is kept.
        """
        if not self.enabled:
            return text
        if type(text) is not str and isinstance(text, str):
            text = exact_text(text)  # (as redact_text: a subclass's own methods never read)
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
        # Each part itself when nothing in it changed (never compared after: see _redact_fields).
        if isinstance(part, TextPart):
            text, extra = _kept(self.redact_text(part.text), part.text), self._redact_mapping(part.extra)
            return part if text is part.text and extra is part.extra else replace(part, text=text, extra=extra)
        if isinstance(part, ThinkingPart):
            # Unsigned, unencrypted reasoning (an opaque one is returned above): its text and its extra, as a text
            # part's (the extra was left out until the eighteenth stop's review of lane S: a secret there went out).
            text, extra = _kept(self.redact_text(part.text), part.text), self._redact_mapping(part.extra)
            return part if text is part.text and extra is part.extra else replace(part, text=text, extra=extra)
        if isinstance(part, UnknownPart):
            data = self._redact_mapping(part.data)
            return part if data is part.data else replace(part, data=data)
        if isinstance(part, DocumentPart | ImagePart):
            # Inline data is binary (base64); a URL can carry credentials, a document's title (a file name) any text.
            url = _kept(self.redact_text(part.url), part.url) if part.url else part.url
            extra = self._redact_mapping(part.extra)
            if isinstance(part, DocumentPart):
                title = _kept(self.redact_text(part.title), part.title) if part.title else part.title
                if url is part.url and title is part.title and extra is part.extra:
                    return part
                return replace(part, url=url, title=title, extra=extra)
            return part if url is part.url and extra is part.extra else replace(part, url=url, extra=extra)
        return part

    def redact_provider_state(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` (redacted already) with the readable text of a provider's opaque state redacted too.

        For what contextfold stores or hands elsewhere, never the request (see :mod:`._provider_state`): a signed
        thinking block or a reasoning summary that held a secret keeps the redacted text and loses its signature.
        """
        return redact_provider_state(messages, self.redact_text) if self.enabled else list(messages)

    # -- messages: redacted through the ledger of what each redacted to (see ._messages) ---------------------------
    def redact_message(self, m: Message) -> Message:
        """``m`` with secrets redacted in its text, tool-call arguments, meta and extra.

        Each message is redacted once and the result kept (with a callback: every time); see
        :meth:`MessageRedactor.redact_message <contextfold.redact._messages.MessageRedactor.redact_message>`.
        """
        return self._message_redactor.redact_message(m)

    def redact_messages(self, messages: Iterable[Message], *, kept: bool = True) -> list[Message]:
        """Every message redacted, in bulk: first every secret of the batch is learned, then each is redacted.

        ``kept=False``: neither take nor leave the batch kept for the next call; see
        :meth:`MessageRedactor.redact_messages <contextfold.redact._messages.MessageRedactor.redact_messages>`.
        """
        return self._message_redactor.redact_messages(messages, kept=kept)

    def redact_messages_at(self, messages: Iterable[Message], *, kept: bool = True) -> tuple[list[Message], int]:
        """:meth:`redact_messages`, and the generation of :attr:`memory` the result holds at (read before the work).

        A secret learned on another thread after that generation may stand bare in the result; see
        :meth:`MessageRedactor.redact_messages_at <contextfold.redact._messages.MessageRedactor.redact_messages_at>`.
        """
        return self._message_redactor.redact_messages_at(messages, kept=kept)

    def learn_from(self, messages: Iterable[Message], *, keep: bool = True) -> None:
        """Learn every secret the patterns find in ``messages`` (their texts, arguments, meta and extra).

        What a session does before it writes text of its own (a summary, a digest): a value found in context
        anywhere in the session is then known bare everywhere. What each message redacts to is kept for the next
        bulk redaction (the summarizer's request after a compaction's catch-up); ``keep=False`` keeps nothing, for a
        catch-up no summary follows (a masking's: looking its messages up was ~5% of a masking turn, issue 22).
        """
        self._message_redactor.learn_from(messages, keep=keep)

    def redact_ahead(self, messages: Iterable[Message], *, paced: bool = True) -> int:
        """Redact ``messages`` (learning their secrets) and keep the results for the transcripts and summaries to come.

        Paced, it leaves the GIL to other threads between slices; returns how many messages were looked at.
        """
        return self._message_redactor.redact_ahead(messages, paced=paced)

    def is_clean(self, m: Message) -> bool:
        """Whether :meth:`redact_message` is known to return ``m`` itself now (found clean, nothing learned since)."""
        return self._message_redactor.is_clean(m)

    def forget_messages(self, messages: Iterable[Message] | None = None) -> None:
        """Drop what it kept of ``messages`` (of every message it redacted when None); its memory of secrets stays.

        What a manager does when it closes, and with what a compaction removed once its transcript is written: the
        kept results are there to spare the session's later scans, and hold the messages (and their redacted copies)
        alive. A message forgotten and asked for again is redacted again, to the same result.
        """
        if messages is None:
            self._message_redactor.ledger.clear()
        else:
            self._message_redactor.ledger.forget(messages)

    def _redact_fields(self, m: Message) -> Message:
        content: str | tuple[Part, ...] = m.content
        if isinstance(content, str):
            content = _kept(self.redact_text(content), content)
        else:
            redone_parts = tuple(map(self._redact_part, content))
            if any(map(operator.is_not, redone_parts, content)):
                content = redone_parts
        calls = m.tool_calls
        if calls:
            redone = tuple(map(self._redact_call, calls))
            if any(map(operator.is_not, redone, calls)):
                calls = redone
        meta, extra = self._redact_mapping(m.meta), self._redact_mapping(m.extra)
        # (a participant's name is any text a caller gave)
        name = _kept(self.redact_text(m.name), m.name) if m.name else m.name
        if content is m.content and calls is m.tool_calls and meta is m.meta and extra is m.extra and name is m.name:
            # Nothing changed: the message itself, not a copy compared with it after (issue 22: most of a session's
            # messages redact to themselves).
            return m
        return replace(m, content=content, tool_calls=calls, meta=meta, extra=extra, name=name)

    def _redact_call(self, call: ToolCall) -> ToolCall:
        """``call`` with its arguments and extra redacted; ``call`` itself when neither changed."""
        arguments = _kept(self.redact_json_string(call.arguments), call.arguments)
        extra = self._redact_mapping(call.extra)
        if arguments is call.arguments and extra is call.extra:
            return call
        return ToolCall(call.id, call.name, arguments, extra=extra)

    def _redact_mapping(self, mapping: Mapping[str, Any]) -> Mapping[str, Any]:
        """``mapping`` (a message's meta or extra, read-only) redacted; ``mapping`` itself when nothing changed."""
        if not mapping:
            return mapping
        redacted = self.redact_obj(mapping)
        if len(redacted) == len(mapping) and all(map(operator.is_, redacted.values(), mapping.values())):
            return mapping  # (most metas: every value kept as it was; C loops, as the == it replaces)
        return mapping if _unchanged(redacted, mapping) else freeze(redacted)

    def _generation(self) -> int:
        return self.memory.generation if self.remember else 0


def _kept(redacted: str, original: str) -> str:
    """``original`` when ``redacted`` (what redaction made of it) is the same text, else ``redacted``.

    A text re-serialized to the same characters (a call's JSON arguments) is the field itself, so an unchanged
    message is itself (redact_message tells so by identity). Compared only as exact ``str`` (a Message holds its
    texts so): never by a caller's ``__eq__``.
    """
    if redacted is original or type(redacted) is not str or type(original) is not str:
        return redacted
    return original if redacted == original else redacted


def _unchanged(redacted: Any, original: Any) -> bool:
    """Whether ``redacted`` (what ``redact_obj`` made of ``original``) holds what ``original`` does.

    Compared by exact types and identity only: ``==`` between an exact value and a subclass calls the subclass's
    ``__eq__`` first, and one that lies said a redacted meta equalled its original, which was then kept (eighteenth
    stop, lane S). A value redact_obj left alone is the same object; a container it rebuilt is walked.
    """
    if redacted is original:
        return True
    kind, other = type(redacted), type(original)
    if kind is dict and (other is dict or other is MappingProxyType):
        if len(redacted) != len(original):
            return False
        if all(map(operator.is_, redacted.values(), original.values())):
            return True  # (most metas: every value kept as it was; keys are always kept)
        return all(key is old_key and _unchanged(value, old)
                   for (key, value), (old_key, old) in zip(redacted.items(), original.items(), strict=True))
    if kind is not other:
        return False
    if kind is list or kind is tuple:
        return len(redacted) == len(original) and all(map(_unchanged, redacted, original))
    return kind in EXACT_LEAVES and bool(redacted == original)


def _clearing_of(redactor: Redactor) -> object:
    """The clearing ``redactor`` itself has open in this thread, or None."""
    cleared = getattr(redactor._clearings, "now", None)
    return cleared if cleared is not None and cleared[0] == id(redactor) else None


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
