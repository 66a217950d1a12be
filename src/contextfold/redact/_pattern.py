"""What a secret pattern is, and the checks every kind of rule shares: placeholders, randomness, base64 text.

The rules themselves are in :mod:`~contextfold.redact._tokens` (provider token shapes),
:mod:`~contextfold.redact._contexts` (configuration files, headers and command lines) and
:mod:`~contextfold.redact.rules` (assignments, URLs, keys, the table).
"""

from __future__ import annotations

import binascii
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ._anchors import search_at
from ._runs import ClassRuns

__all__ = ["TOKEN_CHARS", "SecretPattern", "accept_value", "decoded_text", "filler", "is_placeholder", "looks_random",
           "made_up", "pattern", "prefixed", "value_group"]


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """One kind of secret.

    The secret is the named group ``v`` (or the first matching group whose name starts with ``v``), else the whole
    match; only that span is replaced by ``[REDACTED:<name>]``. ``accept``, when given, sees every match and may
    reject it (False: code that has a secret's context but no secret) or name what it found (a str: one regex
    that finds several kinds).
    """

    name: str
    regex: re.Pattern[str]
    # Lower-case substrings of which at least one is in every match; none in the text means no need to search.
    triggers: tuple[str, ...] = ()
    accept: Callable[[re.Match[str]], bool | str] | None = None
    # A case-sensitive pattern run over the lower-cased text whose match starts are where ``regex`` may match:
    # a case-insensitive regex with a look-behind cannot use the engine's literal search and is ten times slower.
    locate: re.Pattern[str] | None = None
    # For a pattern without triggers: a pattern over the lower-cased text that finds something wherever ``regex``
    # can match (a superset). Bulk redaction skips a text in which neither a trigger nor this is found; a pattern
    # with neither turns that prefilter off. With triggers, the same superset: the bulk prefilter clears a text
    # holding a trigger but not this (see ._gate); the scan itself does not look for it.
    needs: re.Pattern[str] | None = None
    # Where ``regex`` may start matching: only where a maximal run of this class (of at least its length) starts.
    # The runs are found at C speed and the regex tried at each (a bare base64 run: the regex engine alone reads it
    # at ~30 ns a character).
    starts: ClassRuns | None = None
    # With ``starts``: whether ``accept`` turns down whatever the regex matches at the run ``text[start:end]``, told
    # from the run alone (True only when sure), so that neither is run there (most runs are file paths).
    rejects: Callable[[str, int, int], bool] | None = None
    # Lower-case strings one of which a text lower-cased to its own length holds wherever ``accept`` takes a match
    # (the cookie rule's header): a text holding none has no finding, and the regex is not tried at its places.
    requires: tuple[str, ...] = ()

    @classmethod
    def compile(cls, name: str, pattern: str, flags: int = 0) -> SecretPattern:
        """A pattern from regex source (raises ``re.error`` for invalid syntax)."""
        return cls(name, re.compile(pattern, flags))

    @classmethod
    def untrusted(cls, name: str, source: str, *, log_lines: bool = False) -> SecretPattern:
        """A pattern from an operator's regex source, each scan under the time limit model-chosen patterns have.

        A scan past the limit raises :class:`~contextfold.untrusted.regex.PatternTimeout`; the redactor then redacts
        the whole text it was scanning (it cannot say which part is safe). Raises ``InvalidPattern`` (a
        ``ValueError``) for invalid syntax. ``log_lines``: the scans are of a proxy's log lines, each with a budget
        that grows with the line (see :class:`~contextfold.untrusted.regex.TimedPattern`).
        """
        from ..untrusted.regex import TimedPattern

        timed: Any = TimedPattern(source, log_lines=log_lines)
        return cls(name, timed)

    def may_match(self, lowered: str) -> bool:
        """False only when no trigger occurs in ``lowered`` (the text, lower-cased)."""
        return not self.triggers or any(t in lowered for t in self.triggers)

    def matches(self, text: str, lowered: str | None = None) -> list[re.Match[str]]:
        """Every accepted match in ``text`` (``lowered``: ``text.lower()``, when the caller has it)."""
        return [m for m, _ in self.findings(text, lowered)]

    def findings(self, text: str, lowered: str | None = None,
                 located: Iterable[int] | None = None) -> list[tuple[re.Match[str], str]]:
        """Every accepted match in ``text`` with the name of what it found.

        ``located``: every place where the search can match, ascending (where its heads start in ``lowered``, see
        :mod:`._anchors`), so that it is tried there only: ``locate``'s places, or without it the regex's own;
        None: the whole text is searched.
        """
        found: list[re.Match[str]]
        if self.starts is not None:
            rejects, match = self.rejects, self.regex.match
            if rejects is None:
                found = [m for m in map(match, itertools.repeat(text), self.starts.starts(text)) if m is not None]
            else:
                found = [m for start, end in self.starts.runs(text)
                         if not rejects(text, start, end) and (m := match(text, start)) is not None]
        elif self.locate is not None:
            lowered = text.lower() if lowered is None else lowered
            if len(lowered) == len(text):  # (lower-casing can change the length of some non-ASCII text)
                places = self.locate.finditer(lowered) if located is None else \
                    search_at(self.locate, lowered, located)
                candidates = (self.regex.match(text, at.start()) for at in places)
                found = [m for m in candidates if m is not None]
            else:
                found = list(self.regex.finditer(text))
        elif located is not None and lowered is not None and len(lowered) == len(text):
            # (Each character lower-cased to one: the regex's heads, lower-cased, start where they start in text.)
            found = list(search_at(self.regex, text, located))
        else:
            found = list(self.regex.finditer(text))
        if self.accept is None:
            return [(m, self.name) for m in found]
        named = ((m, self.accept(m)) for m in found)
        return [(m, verdict if isinstance(verdict, str) else self.name) for m, verdict in named if verdict]


def pattern(
    name: str, source: str, *triggers: str, accept: Callable[[re.Match[str]], bool | str] | None = None,
    needs: str | None = None, starts: ClassRuns | None = None, rejects: Callable[[str, int, int], bool] | None = None,
) -> SecretPattern:
    """A pattern from its regex source, the lower-case triggers it needs, and an optional ``accept`` check."""
    return SecretPattern(name, re.compile(source), tuple(triggers), accept,
                         needs=re.compile(needs) if needs is not None else None, starts=starts, rejects=rejects)


# Characters a token is made of: a prefixed token must not be the tail of a longer one.
TOKEN_CHARS = r"A-Za-z0-9_\-"


def prefixed(
    name: str, prefix: str, rest: str, *triggers: str, accept: Callable[[re.Match[str]], bool | str] | None = None
) -> SecretPattern:
    """A token starting with ``prefix`` (a fixed-width regex), not inside a longer token.

    The prefix comes first and the boundary check after it, so that the engine can search for the prefix's literal.
    """
    return pattern(name, rf"{prefix}(?<![{TOKEN_CHARS}]{prefix}){rest}(?![{TOKEN_CHARS}])", *triggers, accept=accept)


# -- what random looks like ----------------------------------------------------------------------------------------
# Bits per character above which a string is taken for random: 40 random base64 characters score about 4.9,
# English words and paths of the same length 3.5-4.1.
_RANDOM_ENTROPY_BITS = 4.3


def _entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def looks_random(text: str) -> bool:
    """Whether ``text`` mixes upper case, lower case and digits with the entropy of random characters."""
    return (
        any(c.isupper() for c in text)
        and any(c.islower() for c in text)
        and any(c.isdigit() for c in text)
        and _entropy(text) >= _RANDOM_ENTROPY_BITS
    )


def made_up(value: str) -> bool:
    """At least two of lower case, upper case, digits, symbols, and not only a number."""
    classes = (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
        any(not c.isalnum() for c in value),
    )
    return sum(classes) >= 2 and not value.replace(".", "").replace("-", "").isdigit()


_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
# A run of one character this long is filling a template (sk-xxxxxxxx, XXXX-XXXX, 00000000), not a key.
_FILLER_RUN_CHARS = 6


def filler(value: str) -> bool:
    """Whether the longest letter/digit run of ``value`` repeats one character (``sk_test_XXXXXXXX``)."""
    runs = _ALNUM_RUN.findall(value)
    if not runs:
        return False
    longest = max(runs, key=len)
    return len(longest) >= _FILLER_RUN_CHARS and len(set(longest)) == 1


# -- placeholders: values that stand for a secret without being one ------------------------------------------------
_NULL_LIKE = re.compile(r"(?i)none|null|nil|true|false|undefined|~|-|\*+|x{3,}|\.{3}|…")
# <your-key>, [PAD], ${API_KEY} (and ${KEY:-default}), $API_KEY, %s, %(key)s, {key}, {{ key }}, {{ .Values.x }},
# ${{ secrets.X }}: a reference to where the value is, not the value.
_PLACEHOLDER = re.compile(
    r"<[^<>]*>|\[[^\[\]]*\]|\$\{\{?[^}]*\}?\}?|\$[A-Za-z_]\w*|%(?:\(\w+\))?[sdrif]"
    r"|\{\{?[ \t]*[A-Za-z_.$][\w.$\[\]'\"| -]*\}?\}?"
)
# A template's filling: sk-..., ab12…, xxxx, ****, and the words people write instead of a secret.
_ELLIPSIS = re.compile(r"\.{3}|…|\*{3,}|x{4,}|X{4,}")
_PLACEHOLDER_WORDS = frozenset({"changeme", "change_me", "change-me", "replaceme", "replace_me", "replace-me",
                                "redacted", "todo", "tbd", "fixme", "secret", "password"})
# A YAML tag (`password: !vault |`, CloudFormation's `!Ref DbPassword`): the value is elsewhere. A tag is a word
# (`!GetAZs` at most two capitals in a row): `!AAAAAAAAAAB` is a password.
_YAML_TAG = re.compile(r"!!?[A-Za-z_][A-Za-z_.:]*")
_CAPITALS_RUN = re.compile(r"[A-Z]{3}")
# $NAME, ${NAME}, $(command), `command`: the shell substitutes the value.
_REFERENCE = re.compile(r"\$[A-Za-z_{(]|`")


def is_placeholder(value: str, *, maybe_tag: bool = True) -> bool:
    """Whether a secret-keyed value holds no secret: empty, null-like, a placeholder or a variable reference.

    ``maybe_tag``: the value was written bare, where ``!Ref`` or ``!vault`` is a YAML tag, not a value; a quoted
    ``"!AAaAAa"`` (JSON, a quoted YAML scalar) is a literal string like any other.
    """
    stripped = value.strip()
    return (not stripped or bool(_NULL_LIKE.fullmatch(stripped) or _PLACEHOLDER.fullmatch(stripped))
            or bool(_ELLIPSIS.search(stripped)) or stripped.lower() in _PLACEHOLDER_WORDS
            or bool(maybe_tag and _YAML_TAG.fullmatch(stripped) and not _CAPITALS_RUN.search(stripped))
            or bool(_REFERENCE.match(stripped)) or filler(stripped))


# -- base64 that decodes to text -------------------------------------------------------------------------------------
# Decoded bytes that are mostly printable text: base64 of a document, not of key material.
_PRINTABLE_SHARE = 0.95


def decoded_text(run: str) -> str | None:
    """``run`` base64-decoded, when that gives readable UTF-8 text (else None)."""
    padded = run + "=" * (-len(run) % 4)
    try:
        # (What base64.b64decode(padded, validate=True) does, without its wrapping: every base64 run of a scanned
        # text is decoded, most of them file paths, issue 22.)
        raw = binascii.a2b_base64(padded.encode("ascii"), strict_mode=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if not text:
        return None
    printable = sum(1 for c in text if c.isprintable() or c in "\r\n\t")
    return text if printable >= _PRINTABLE_SHARE * len(text) else None


# -- the value of a match ---------------------------------------------------------------------------------------------
# Groups a value may be in, and whether it was quoted: rules with several ways to write a value name them v1, v2, …
_VALUE_GROUPS = (("v1", True), ("v2", True), ("v3", False), ("v4", True), ("v5", True), ("v", False))


def value_group(m: re.Match[str]) -> tuple[str, bool, int] | None:
    """``(value, quoted, end)`` of the first value group that matched, or None."""
    groups = m.re.groupindex
    for name, quoted in _VALUE_GROUPS:
        value = m.group(name) if name in groups else None
        if value is not None:
            return value, quoted, m.end(name)
    return None


def accept_value(m: re.Match[str]) -> bool:
    """A match whose value is not a placeholder, a variable reference or a template's filling."""
    found = value_group(m)
    return found is not None and not is_placeholder(found[0], maybe_tag=not found[1])
