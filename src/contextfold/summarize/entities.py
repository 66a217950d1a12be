"""Entity extraction: the names an agent will need again (paths, identifiers, ids, errors, URLs, numbers).

Used twice: the extractive summarizer lists these densely so that a compacted session can still name them, and the
replay harness measures recall with the same function (what an assistant turn mentions after a compaction must be
in the view or retrievable). Precision matters as much as recall: plain English words are never entities.

Extraction is regex based and deterministic. Spans claimed by a stronger kind (a URL, a path) are blanked before
weaker kinds run, so ``/testbed/a/b.py`` yields the path and not also ``b.py`` or ``a``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable

from .._memo import TextMemo, size_of_strings, text_key
from ..telemetry._pace import GilPacer

__all__ = [
    "ENTITY_KINDS", "bare_numbers", "extract_entities", "extract_entities_by_kind", "readable", "warm_entities",
]

# Results by text (its hash: the text itself is not kept), least recently used dropped first once they hold this
# many bytes. Extraction costs ~0.3 µs per character (15 rules); a message is read when it is added (issue 22), and
# every later compaction, masking and read-ahead finds it read. 64 MB hold the entities of ~20M characters of tool
# output, several windows' worth, whatever the number of messages.
_CACHE_BYTES = 64 * 1024 * 1024
_cache: TextMemo[tuple[tuple[str, tuple[str, ...]], ...]] = TextMemo(_CACHE_BYTES)
# What extraction reads of one text: its first and last characters. A huge paste (a 10 MB log) is read at its ends,
# where a summary's names are (the task, the error); the whole text stays in the archive and the tool output cache.
MAX_READ_HEAD_CHARS = 300_000
MAX_READ_TAIL_CHARS = 100_000

# Kinds in the order they claim text; also the order the summarizer lists them in.
ENTITY_KINDS: tuple[str, ...] = ("path", "url", "test", "error", "identifier", "id", "number", "flag", "email")

# Extensions that make a bare word a file name (``client.py``) rather than a sentence end or a dotted name.
_FILE_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|jsx|ts|tsx|mjs|cjs|json|jsonl|yaml|yml|toml|ini|cfg|md|rst|txt|csv|tsv|html|htm|css|"
    "scss|go|rs|java|kt|scala|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|zsh|ps1|sql|xml|lock|log|traj|proto|tf|gradle|swift|"
    "patch|diff|pem|crt|sqlite|parquet|zip|tar|gz|whl|png|jpg|svg|pdf"
)
# Known extension-less file names that are always files.
_BARE_FILES = "Makefile|Dockerfile|Containerfile|Jenkinsfile|Procfile|Gemfile|Rakefile|LICENSE|README|CHANGELOG"

# Units a number is kept with: durations, sizes, money, counts that matter to an agent's task.
_UNITS = (
    "ms|us|ns|s|sec|secs|seconds?|minutes?|mins?|hours?|hrs?|h|days?|weeks?|months?|years?|"
    "B|KB|KiB|kB|MB|MiB|GB|GiB|TB|%|px|pt|em|tokens?|lines?|bytes?|chars?|characters?|items?|"
    "USD|EUR|GBP|dollars?|passengers?|bags?|baggages?|nights?|tickets?|seats?|rows?|files?|tests?|workers?|cores?|"
    "GHz|MHz|x"
)

# Abbreviations that look dotted but are prose.
_PROSE_DOTTED = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m", "u.s"})

_URL = re.compile(r"\b(?:https?|ftp|file|s3|gs|redis|postgres(?:ql)?|mysql|sqlite)://[^\s<>\"'`)\]}]+")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_NODE_ID = re.compile(r"(?<![\w/.-])[\w./-]*\.py::[\w:\[\].-]+")
_PATH = re.compile(
    r"(?<![\w/.<-])(?:~|\.{1,2})?/[\w.+@-]+(?:/[\w.+@-]+)*/?"  # absolute, home or ./relative
    r"|(?<![\w/.<-])[\w.+@-]+(?:/[\w.+@-]+)+/?"  # relative with a slash
    rf"|(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:{_FILE_EXTENSIONS})(?![\w-])"  # bare file name
    rf"|\b(?:{_BARE_FILES})\b"
)
_TEST = re.compile(r"\b(?:test_\w+|Test[A-Z]\w*|\w+_test)\b")
_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Failure)\b")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?![\w])")
_SNAKE = re.compile(r"(?<![\w.])_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*(?!\w)")
_CAMEL = re.compile(r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+)\b")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w{2,})\((?!s\))")
_BACKTICK = re.compile(r"`([^`\s]{2,100})`")
_MIXED_ID = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]{3,}\b")
_CODE = re.compile(r"\b[A-Z][A-Z0-9]{2,7}\b")
_NUMBER = re.compile(
    r"\$\d[\d,]*(?:\.\d+)?"  # money
    r"|\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"  # dates and timestamps
    r"|\bv?\d+\.\d+\.\d+(?:[.-]\w+)?\b"  # versions
    rf"|\b\d[\d,]*(?:\.\d+)?\s?(?:{_UNITS})(?![\w])"  # quantities with a unit
)
# (The look-behind after the literal "--": the engine skips to each "--" instead of trying every position.)
_FLAG = re.compile(r"--(?<![\w-]--)[A-Za-z][\w-]+")

_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th|s)", re.IGNORECASE)

_ESCAPE = re.compile(r"\\[nrt]")
# A redaction marker ([REDACTED:password]) stands for a secret: neither it nor its kind is a name worth keeping.
_REDACTED = re.compile(r"\[REDACTED:[^\]\n]*\]")

_TRAILING = ".,:;!?'\")]}>"


def _accept_path(value: str) -> bool:
    if value.startswith(("/", "~", ".")):
        # "/" or "//" alone is punctuation, not a path.
        return any(c.isalnum() for c in value)
    if "/" not in value:
        return True  # a bare file name with a known extension
    segments = [s for s in value.split("/") if s]
    # "and/or", "yes/no" are prose: a relative path needs depth, a file name or an identifier-like segment.
    return len(segments) >= 3 or any("." in s or "_" in s for s in segments)


def _accept_dotted(value: str) -> bool:
    parts = value.split(".")
    return value.lower() not in _PROSE_DOTTED and max(len(p) for p in parts) >= 3


def _accept_any(value: str) -> bool:
    return len(value) >= 3


def _accept_mixed_id(value: str) -> bool:
    return _ORDINAL.fullmatch(value) is None


def _accept_backtick(value: str) -> bool:
    return len(value) >= 3 and any(c.isalpha() for c in value)


_Rule = tuple[str, "re.Pattern[str]", Callable[[str], bool], bool]

# (kind, pattern, filter, claims its span): claiming rules blank their matches so weaker rules do not re-read them.
# This table is the specification; _extract runs the same rules, in this order, the fast way (see there).
_RULES: tuple[_Rule, ...] = (
    ("url", _URL, _accept_any, True),
    ("email", _EMAIL, _accept_any, True),
    ("test", _NODE_ID, _accept_any, True),
    ("path", _PATH, _accept_path, True),
    ("number", _NUMBER, _accept_any, True),
    ("flag", _FLAG, _accept_any, True),
    ("error", _ERROR, _accept_any, False),
    ("test", _TEST, _accept_any, False),
    ("identifier", _BACKTICK, _accept_backtick, False),
    ("identifier", _DOTTED, _accept_dotted, False),
    ("identifier", _SNAKE, _accept_any, False),
    ("identifier", _CAMEL, _accept_any, False),
    ("identifier", _CALL, _accept_any, False),
    ("id", _MIXED_ID, _accept_mixed_id, False),
    ("id", _CODE, _accept_any, False),
)

# -- the fast way ------------------------------------------------------------------------------------------------
# The engine tries a pattern without a literal or character-set prefix at every position of the text (~40-80 ns
# each), so 15 patterns cost ~1 µs per character; the rules are run with the same results for less:
#
# - a rule whose every match contains a literal is skipped when the text lacks it (a URL needs "://");
# - _NUMBER_FAST is _NUMBER starting with a character set (the engine skips to a digit, "$" or "v"), the word
#   boundary checked by a look-behind after that character;
# - no rule but _NUMBER matches across whitespace, and within a whitespace-separated word a match depends on that
#   word alone (every look-behind and look-ahead treats whitespace as it treats the start or end of the text): so
#   the other rules read each distinct word once, and only the words that can hold a match (a path needs "/", "."
#   or a bare file name), joined by spaces. Words are taken in order of first appearance, and so are the values.
#
# tests/summarize/test_entities_fast.py checks the results against _RULES run the plain way (_extract_plain).
_NUMBER_FAST = re.compile(
    r"[$\dv](?:(?<=\$)\d[\d,]*(?:\.\d+)?"
    r"|(?<=\d)(?<!\w.)\d{3}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"
    r"|(?<!\w.)(?:(?<=v)\d+|(?<=\d)\d*)\.\d+\.\d+(?:[.-]\w+)?\b"
    rf"|(?<=\d)(?<!\w.)[\d,]*(?:\.\d+)?\s?(?:{_UNITS})(?![\w]))"
)
_BARE_FILE = re.compile(_BARE_FILES)  # (without the boundaries: finds every word that can hold one)
_WHITESPACE_RUN = re.compile(r"(\s+)")
# Up to this many words that held paths are blanked with str.find (each search may scan the rest of the text);
# past it, one split of the text at whitespace (~50 ns a character) is cheaper.
_FIND_MAX_WORDS = 64
# Word filters that are not literals: holds an upper-case letter (or no lower-case one: str.islower() is False);
# holds something besides letters (an id needs a digit).
_UPPER: tuple[str, ...] = ("<upper>",)
_NOT_ALPHA: tuple[str, ...] = ("<not alpha>",)

# Claiming rules over the whole text: (kind, pattern, filter, literals one of which every match holds).
_WHOLE_TEXT: tuple[tuple[str, re.Pattern[str], Callable[[str], bool], tuple[str, ...]], ...] = (
    ("url", _URL, _accept_any, ("://",)),
    ("email", _EMAIL, _accept_any, ("@",)),
    ("test", _NODE_ID, _accept_any, (".py::",)),
)
_AFTER_PATH: tuple[tuple[str, re.Pattern[str], Callable[[str], bool], tuple[str, ...]], ...] = (
    ("number", _NUMBER_FAST, _accept_any, ()),
    ("flag", _FLAG, _accept_any, ("--",)),
)
# Rules that claim nothing, over distinct words: (kind, pattern, filter, what a word needs to be read).
_WORD_RULES: tuple[tuple[str, re.Pattern[str], Callable[[str], bool], tuple[str, ...]], ...] = (
    ("error", _ERROR, _accept_any, ("Error", "Exception", "Warning", "Exit", "Interrupt", "Failure")),
    ("test", _TEST, _accept_any, ("est",)),  # test_x, x_test, TestX
    ("identifier", _BACKTICK, _accept_backtick, ("`",)),
    ("identifier", _DOTTED, _accept_dotted, (".",)),
    ("identifier", _SNAKE, _accept_any, ("_",)),
    ("identifier", _CAMEL, _accept_any, _UPPER),
    ("identifier", _CALL, _accept_any, ("(",)),
    ("id", _MIXED_ID, _accept_mixed_id, _NOT_ALPHA),
    ("id", _CODE, _accept_any, _UPPER),
)


def extract_entities_by_kind(text: str) -> dict[str, list[str]]:
    """Entities of ``text`` by kind, each list in order of first appearance, each value once across kinds.

    A text over :data:`MAX_READ_HEAD_CHARS` + :data:`MAX_READ_TAIL_CHARS` characters is read at its two ends.
    Results are remembered by text (see :func:`warm_entities`); every call returns fresh lists.
    """
    cached = _cached_entities(text)
    return {kind: list(values) for kind, values in cached}


def _cached_entities(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    key = text_key(text)
    cached = _cache.get(key)
    if cached is None:
        found = _extract(readable(text))
        cached = tuple((kind, tuple(values)) for kind, values in found.items())
        _cache.put(key, cached, sum(size_of_strings(values) for _, values in cached))
    return cached


def readable(text: str) -> str:
    """What extraction reads of ``text``: all of it, or its two ends (joined at a line break) when it is huge."""
    if len(text) <= MAX_READ_HEAD_CHARS + MAX_READ_TAIL_CHARS:
        return text
    return f"{text[:MAX_READ_HEAD_CHARS]}\n{text[-MAX_READ_TAIL_CHARS:]}"


def is_read(text: str) -> bool:
    """Whether the entities of ``text`` are remembered (no extraction would run for it now)."""
    return text_key(text) in _cache


def warm_entities(texts: Iterable[str]) -> int:
    """Extract (and remember) the entities of ``texts`` not remembered yet, in slices that leave the GIL to others.

    For a background thread: a later compaction finds the entities of the messages it summarizes already
    extracted. Returns how many texts were extracted.
    """
    pacer = GilPacer()
    done = 0
    for text in texts:
        if not is_read(text):
            _cached_entities(text)
            done += 1
        pacer.tick()
    return done


def _extract(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {kind: [] for kind in ENTITY_KINDS}
    seen: set[str] = set()
    # JSON-escaped text ("line\\nPython") must not read as the word "nPython".
    work = _ESCAPE.sub("  ", text) if "\\" in text else text
    if "[REDACTED:" in work:
        work = _REDACTED.sub(_spaces, work)
    for kind, pattern, accept, literals in _WHOLE_TEXT:
        if any(literal in work for literal in literals):
            if pattern is _EMAIL:
                work = _read_emails(work, found, seen)
            else:
                work = _read(work, kind, pattern, accept, found, seen, claims=True)
    work = _read_paths(work, found, seen)
    for kind, pattern, accept, literals in _AFTER_PATH:
        if not literals or any(literal in work for literal in literals):
            work = _read(work, kind, pattern, accept, found, seen, claims=True)
    words = list(dict.fromkeys(work.split()))
    everything = " ".join(words)
    for kind, pattern, accept, needs in _WORD_RULES:
        if needs is _UPPER:
            chosen = [w for w in words if not w.islower()]
        elif needs is _NOT_ALPHA:
            chosen = [w for w in words if not w.isalpha()]
        else:
            chosen = _words_with(words, everything, needs)
        if chosen:
            _read(" ".join(chosen), kind, pattern, accept, found, seen, claims=False)
    return found


def _words_with(words: list[str], everything: str, literals: tuple[str, ...]) -> list[str]:
    """The words holding one of ``literals`` (``everything``: the words joined, to rule literals out at once)."""
    present = [literal for literal in literals if literal in everything]
    if len(present) <= 1:
        return [w for w in words if present[0] in w] if present else []
    hit: set[str] = set()
    for literal in present:
        hit.update(w for w in words if literal in w)
    return [w for w in words if w in hit]


def _read(work: str, kind: str, pattern: re.Pattern[str], accept: Callable[[str], bool], found: dict[str, list[str]],
          seen: set[str], *, claims: bool) -> str:
    """One rule over ``work``: its values into ``found``; ``work`` with the claimed spans blanked."""
    spans: list[tuple[int, int]] = []
    group = 1 if pattern.groups else 0
    values = found[kind]
    for match in pattern.finditer(work):
        value = match.group(group).rstrip(_TRAILING)
        if kind == "identifier" and value.endswith("()"):
            value = value[:-2]
        if not value or not accept(value):
            continue
        if claims:
            spans.append(match.span())
        if value not in seen:
            seen.add(value)
            values.append(value)
    return _blank(work, spans) if spans else work


def _read_emails(work: str, found: dict[str, list[str]], seen: set[str]) -> str:
    """The e-mail rule (``_EMAIL``) tried only where an "@" is; ``work`` with every address blanked.

    The pattern has no prefix the engine can skip to, so it was tried at every position of the text (Python code
    has "@" in its decorators). A match holds exactly one "@" and starts where the run of local-part characters
    before it starts (its look-behind fails anywhere inside that run), so it is tried there, once per "@".
    """
    spans: list[tuple[int, int]] = []
    values = found["email"]
    end = 0  # where the last address ended: the next one starts at or after it
    at = work.find("@")
    while at >= 0:
        start = at
        while start > end and (work[start - 1].isalnum() or work[start - 1] in _EMAIL_LOCAL_MARKS):
            start -= 1
        match = _EMAIL.match(work, start) if start < at else None
        if match is not None:
            value = match.group().rstrip(_TRAILING)
            if value:  # (_accept_any: an address is never shorter than 3)
                spans.append(match.span())
                end = match.end()
                if value not in seen:
                    seen.add(value)
                    values.append(value)
        at = work.find("@", max(at + 1, end))
    return _blank(work, spans) if spans else work


# Besides letters, digits and "_" (str.isalnum() and "_" are what \w matches), what the local part of _EMAIL holds.
_EMAIL_LOCAL_MARKS = "_.+-"
# The tail of a bare file name (_PATH's third way): a word with a dot and no slash holds a path only with one of these
# (or a name of _BARE_FILES): the others (``self.value``, ``1.5``, a sentence's end) are not given to _PATH at all.
_FILE_TAIL = re.compile(rf"\.(?:{_FILE_EXTENSIONS})(?![\w-])")


def _read_paths(work: str, found: dict[str, list[str]], seen: set[str]) -> str:
    """The path rule, over the distinct words that can hold a path; ``work`` with every path blanked."""
    distinct = dict.fromkeys(work.split())
    if _BARE_FILE.search(work) is None:
        chosen = [w for w in distinct if "/" in w or ("." in w and _FILE_TAIL.search(w) is not None)]
    else:
        chosen = [w for w in distinct if "/" in w or ("." in w and _FILE_TAIL.search(w) is not None)
                  or _BARE_FILE.search(w) is not None]
    if not chosen:
        return work
    starts: list[int] = []
    offset = 0
    for w in chosen:
        starts.append(offset)
        offset += len(w) + 1
    claimed: dict[int, list[tuple[int, int]]] = {}
    values = found["path"]
    for match in _PATH.finditer(" ".join(chosen)):
        value = match.group().rstrip(_TRAILING)
        if not value or not _accept_path(value):
            continue
        start, end = match.span()
        index = bisect_right(starts, start) - 1
        claimed.setdefault(index, []).append((start - starts[index], end - starts[index]))
        if value not in seen:
            seen.add(value)
            values.append(value)
    if not claimed:
        return work
    if len(claimed) > _FIND_MAX_WORDS:
        # Many words held paths (a file listing): each str.find below would scan to the end of the text, so the
        # text is split at whitespace once instead, and every occurrence of those words replaced.
        blanked_words = {chosen[i]: _blank(chosen[i], spans) for i, spans in claimed.items()}
        parts = _WHITESPACE_RUN.split(work)  # words at even indexes, the whitespace between them at odd ones
        parts[0::2] = [blanked_words.get(w, w) for w in parts[0::2]]
        return "".join(parts)
    # Blank every occurrence of a word that held a path: found with str.find, kept when it is a whole word.
    edits: list[tuple[int, int, str]] = []
    for index, spans in claimed.items():
        word = chosen[index]
        blanked = _blank(word, spans)
        at = work.find(word)
        while at >= 0:
            end = at + len(word)
            if (at == 0 or work[at - 1].isspace()) and (end == len(work) or work[end].isspace()):
                edits.append((at, end, blanked))
            at = work.find(word, at + 1)
    edits.sort()
    pieces: list[str] = []
    last = 0
    for start, end, blanked in edits:
        pieces.append(work[last:start])
        pieces.append(blanked)
        last = end
    pieces.append(work[last:])
    return "".join(pieces)


def _extract_plain(text: str) -> dict[str, list[str]]:
    """What :func:`_extract` computes, by running every rule of ``_RULES`` over the whole text (for the tests)."""
    found: dict[str, list[str]] = {kind: [] for kind in ENTITY_KINDS}
    seen: set[str] = set()
    work = _REDACTED.sub(_spaces, _ESCAPE.sub("  ", text))
    for kind, pattern, accept, claims in _RULES:
        work = _read(work, kind, pattern, accept, found, seen, claims=claims)
    return found


def extract_entities(text: str) -> set[str]:
    """The entities ``text`` mentions: file paths, URLs, test names, error names, identifiers, ids, numbers.

    >>> sorted(extract_entities("Fixed `runshell_db` in /testbed/django/db/client.py; ValueError gone, took 3 s"))
    ['/testbed/django/db/client.py', '3 s', 'ValueError', 'runshell_db']
    """
    return {value for values in extract_entities_by_kind(text).values() for value in values}


# Bare numbers of three digits or more (amounts, counts, ids), whole words, not part of a version or an amount.
# (Starting with a digit, its look-behind after it: the engine skips to the next digit instead of trying every
# position.)
_BARE_NUMBER = re.compile(r"\d(?<![\w.$-]\d)\d{2,}(?:\.\d+)?(?![\w]|[.,]\d)")
# Bare numbers by text, like the entities (a tool output's are read by its reading and by its digest material).
_NUMBERS_CACHE_BYTES = 16 * 1024 * 1024
_numbers_cache: TextMemo[tuple[str, ...]] = TextMemo(_NUMBERS_CACHE_BYTES)
# The line-number column of a numbered listing (``cat -n``, SWE-agent's file viewer, grep -n).
_LISTING_PREFIX = re.compile(r"^\s*\d+[\t ]", re.MULTILINE)


def bare_numbers(text: str) -> list[str]:
    r"""Bare numbers of three digits or more in ``text``, in order; the line numbers of a numbered listing are not.

    :func:`extract_entities` keeps numbers only with a unit, a currency or as dates; an agent also reuses bare ones
    (a price in a JSON answer, a count in a log).

    >>> bare_numbers("   120\tx = 4096  # v1.2.3, 12 items, 306.5")
    ['4096', '306.5']

    Like the entities, a huge text is read at its two ends, and the result is remembered by text.
    """
    key = text_key(text)
    cached = _numbers_cache.get(key)
    if cached is None:
        cached = tuple(_BARE_NUMBER.findall(_LISTING_PREFIX.sub(" ", readable(text))))
        _numbers_cache.put(key, cached, size_of_strings(cached))
    return list(cached)


def _spaces(match: re.Match[str]) -> str:
    return " " * len(match.group())


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        pieces.append(" " * (end - start))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)
