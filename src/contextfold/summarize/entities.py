"""Entity extraction: the names an agent will need again (paths, identifiers, ids, errors, URLs, numbers).

Used twice: the extractive summarizer lists these densely so that a compacted session can still name them, and the
replay harness measures recall with the same function (what an assistant turn mentions after a compaction must be
in the view or retrievable). Precision matters as much as recall: plain English words are never entities.

Extraction is regex based and deterministic. Spans claimed by a stronger kind (a URL, a path) are blanked before
weaker kinds run, so ``/testbed/a/b.py`` yields the path and not also ``b.py`` or ``a``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..telemetry._pace import GilPacer

__all__ = ["ENTITY_KINDS", "bare_numbers", "extract_entities", "extract_entities_by_kind", "warm_entities"]

# Results by text, most recently used last. Extraction costs ~1 µs per character (15 regex passes), and the same
# messages are summarized again: by the next compaction, and in a fleet by a compaction computed again after a
# discarded one. 16,384 texts hold the compactable part of any window; the keys are the messages' own strings.
_CACHE_ENTRIES = 16_384
_cache: OrderedDict[str, tuple[tuple[str, tuple[str, ...]], ...]] = OrderedDict()
_cache_lock = threading.Lock()

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
_FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]+")

_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th|s)", re.IGNORECASE)

_ESCAPE = re.compile(r"\\[nrt]")

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


def extract_entities_by_kind(text: str) -> dict[str, list[str]]:
    """Entities of ``text`` by kind, each list in order of first appearance, each value once across kinds.

    Results are cached by text (see :func:`warm_entities`); every call returns fresh lists.
    """
    with _cache_lock:
        cached = _cache.get(text)
        if cached is not None:
            _cache.move_to_end(text)
    if cached is None:
        found = _extract(text)
        cached = tuple((kind, tuple(values)) for kind, values in found.items())
        with _cache_lock:
            _cache[text] = cached
            if len(_cache) > _CACHE_ENTRIES:
                _cache.popitem(last=False)
    return {kind: list(values) for kind, values in cached}


def warm_entities(texts: Iterable[str]) -> int:
    """Extract (and cache) the entities of ``texts`` not cached yet, in slices that leave the GIL to other threads.

    Meant for a background thread while the agent waits for its model, so that a later compaction finds the
    entities of the messages it summarizes already extracted. Returns how many texts were extracted.
    """
    pacer = GilPacer()
    done = 0
    for text in texts:
        with _cache_lock:
            known = text in _cache
        if not known:
            extract_entities_by_kind(text)
            done += 1
        pacer.tick()
    return done


def _extract(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {kind: [] for kind in ENTITY_KINDS}
    seen: set[str] = set()
    # JSON-escaped text ("line\\nPython") must not read as the word "nPython".
    work = _ESCAPE.sub("  ", text)
    for kind, pattern, accept, claims in _RULES:
        spans: list[tuple[int, int]] = []
        for match in pattern.finditer(work):
            group = 1 if pattern.groups else 0
            value = match.group(group).rstrip(_TRAILING)
            if kind == "identifier" and value.endswith("()"):
                value = value[:-2]
            if not value or not accept(value):
                continue
            if claims:
                spans.append(match.span())
            if value not in seen:
                seen.add(value)
                found[kind].append(value)
        if spans:
            work = _blank(work, spans)
    return found


def extract_entities(text: str) -> set[str]:
    """The entities ``text`` mentions: file paths, URLs, test names, error names, identifiers, ids, numbers.

    >>> sorted(extract_entities("Fixed `runshell_db` in /testbed/django/db/client.py; ValueError gone, took 3 s"))
    ['/testbed/django/db/client.py', '3 s', 'ValueError', 'runshell_db']
    """
    return {value for values in extract_entities_by_kind(text).values() for value in values}


# Bare numbers of three digits or more (amounts, counts, ids), whole words, not part of a version or an amount.
_BARE_NUMBER = re.compile(r"(?<![\w.$-])\d{3,}(?:\.\d+)?(?![\w]|[.,]\d)")
# The line-number column of a numbered listing (``cat -n``, SWE-agent's file viewer, grep -n).
_LISTING_PREFIX = re.compile(r"^\s*\d+[\t ]", re.MULTILINE)


def bare_numbers(text: str) -> list[str]:
    r"""Bare numbers of three digits or more in ``text``, in order; the line numbers of a numbered listing are not.

    :func:`extract_entities` keeps numbers only with a unit, a currency or as dates; an agent also reuses bare ones
    (a price in a JSON answer, a count in a log).

    >>> bare_numbers("   120\tx = 4096  # v1.2.3, 12 items, 306.5")
    ['4096', '306.5']
    """
    return _BARE_NUMBER.findall(_LISTING_PREFIX.sub(" ", text))


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        pieces.append(" " * (end - start))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)
