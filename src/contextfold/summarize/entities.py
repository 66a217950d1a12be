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
from bisect import bisect_right
from collections.abc import Callable, Iterable
from functools import cache
from itertools import accumulate, chain, compress, islice, repeat
from operator import add, is_, itemgetter
from typing import NamedTuple

from .._memo import TextMemo, size_of_strings, text_key
from ..telemetry._pace import GilPacer

__all__ = [
    "ENTITY_KINDS", "bare_numbers", "entity_kinds", "extract_entities", "extract_entities_by_kind", "readable",
    "warm_entities",
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


# What a path holds besides word characters (see _PATH; "_" is a word character but not alphanumeric).
_PATH_PUNCTUATION = "~./+@-_"


def _accept_path(value: str) -> bool:
    if value.startswith(("/", "~", ".")):
        # "/" or "//" alone is punctuation, not a path. (A path's characters are word characters, which are
        # alphanumeric or "_", and these: one besides them is alphanumeric.)
        return bool(value.strip(_PATH_PUNCTUATION))
    if "/" not in value:
        return True  # a bare file name with a known extension
    # "and/or", "yes/no" are prose: a relative path needs depth, a file name or an identifier-like segment.
    if "." in value or "_" in value:  # (in a segment: "/" separates them)
        return True
    segments = value.split("/")
    return len(segments) - segments.count("") >= 3


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
# each), so 15 patterns cost ~1 µs per character. The rules are run with the same results for less (issue 22):
#
# - Every rule but _NUMBER matches within a whitespace-separated word, and what it finds there depends on that word
#   alone (every look-behind and look-ahead treats whitespace as it treats the start or end of the text); blanking
#   a claimed span inside a word only splits it. _NUMBER crosses whitespace in two ways only: a quantity whose unit
#   follows one whitespace character ("3 s", "12 files") and a date followed by a space and a time. So a text is
#   cut into units: its words, except that words joined by such a crossing (found by _NUMBER_ACROSS, a superset)
#   stay one unit with the whitespace between them. What the rules find in a unit depends on the unit alone.
# - A unit's findings, ``(rule, value)`` pairs in rule order, are remembered by the unit itself (_unit_memo): code,
#   logs and listings repeat their words, within an output and across the outputs of a session, and a remembered
#   word costs a dictionary lookup.
# - Units not remembered are read together: each rule runs once over the units that can hold a match (a rule
#   whose every match holds a literal reads only the units holding it), joined by two spaces (no rule crosses two
#   whitespace characters), each match given back to its unit by its offset.
# - _NUMBER_FAST is _NUMBER starting with a character set (the engine skips to a digit, "$" or "v"), the word
#   boundary checked by a look-behind after that character.
#
# A value's first appearance in the text is in the first unit (in order of first appearance) whose findings hold
# it, so the rules' values come out in the order the rules run over the whole text give them.
# tests/summarize/test_entities_fast.py checks the results against _RULES run the plain way (_extract_plain);
# bench/bench_entities.py against the previous implementation over every recorded message.
# The characters a unit starts with, as a class (a look-ahead that ends most tries of the ~70 units at once: after a
# number comes a space, a line break or punctuation far more often than a unit).
_UNIT_FIRSTS = "".join(sorted({unit[0] for unit in _UNITS.split("|")}))
_NUMBER_FAST = re.compile(
    r"[$\dv](?:(?<=\$)\d[\d,]*(?:\.\d+)?"
    r"|(?<=\d)(?<!\w.)\d{3}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"
    r"|(?<!\w.)(?:(?<=v)\d+|(?<=\d)\d*)\.\d+\.\d+(?:[.-]\w+)?\b"
    rf"|(?<=\d)(?<!\w.)[\d,]*(?:\.\d+)?\s?(?=[{_UNIT_FIRSTS}])(?:{_UNITS})(?![\w]))"
)
# Where _NUMBER may cross one whitespace character: after a digit or a comma, before a unit or a time. ("%" is taken
# whatever follows it: what follows may be a span an earlier rule claims, which reads as whitespace.)
_NUMBER_ACROSS = re.compile(rf"[\d,]\s(?=[\d{_UNIT_FIRSTS}])(?=(?:{_UNITS})(?![\w])|%|\d\d:\d\d)")
_BARE_FILE = re.compile(_BARE_FILES)  # (without the boundaries: finds every unit that can hold one)
# The tail of a bare file name (_PATH's third way): a unit with a dot and no slash holds a path only with one of these
# (or a name of _BARE_FILES): the others (``self.value``, ``1.5``, a sentence's end) are not given to _PATH at all.
_FILE_TAIL = re.compile(rf"\.(?:{_FILE_EXTENSIONS})(?![\w-])")
_DIGIT = re.compile(r"\d")
# Unit filters that are not literals: holds an upper-case letter (or no lower-case one: str.islower() is False);
# holds something besides letters (an id needs a digit); can hold a path.
_UPPER = "<upper>"
_NOT_ALPHA = "<not alpha>"
_PATH_LIKE = "<path>"
_DIGITS = "<digit>"

# The rules of _RULES in the same order, each with what a unit needs to be read by it: literals (one of which every
# match holds) or one of the filters above.
_FAST_RULES: tuple[tuple[str, re.Pattern[str], Callable[[str], bool], bool, tuple[str, ...] | str], ...] = (
    ("url", _URL, _accept_any, True, ("://",)),
    ("email", _EMAIL, _accept_any, True, ("@",)),
    ("test", _NODE_ID, _accept_any, True, (".py::",)),
    ("path", _PATH, _accept_path, True, _PATH_LIKE),
    ("number", _NUMBER_FAST, _accept_any, True, _DIGITS),
    ("flag", _FLAG, _accept_any, True, ("--",)),
    ("error", _ERROR, _accept_any, False, ("Error", "Exception", "Warning", "Exit", "Interrupt", "Failure")),
    ("test", _TEST, _accept_any, False, ("est",)),  # test_x, x_test, TestX
    ("identifier", _BACKTICK, _accept_backtick, False, ("`",)),
    ("identifier", _DOTTED, _accept_dotted, False, (".",)),
    ("identifier", _SNAKE, _accept_any, False, ("_",)),
    ("identifier", _CAMEL, _accept_any, False, _UPPER),
    ("identifier", _CALL, _accept_any, False, ("(",)),
    ("id", _MIXED_ID, _accept_mixed_id, False, _NOT_ALPHA),
    ("id", _CODE, _accept_any, False, _UPPER),
)
# Patterns compiled for ASCII text, read when a text or its units are ASCII (most of what an agent reads: code,
# logs, JSON). On an ASCII text they match what the Unicode patterns match: \w, \d and \b mean the same there, and
# \s differs only by the separators \x1c-\x1f (_plain_ascii checks). The engine tests a character's class by a
# table then: ~20% less time over the rules. (Compiled on first use: the module's import stays as it was.)
_UNICODE_ONLY_SPACES = ("\x1c", "\x1d", "\x1e", "\x1f")


class _AsciiPatterns(NamedTuple):
    rules: tuple[re.Pattern[str], ...]  # _FAST_RULES' patterns, in order
    across: re.Pattern[str]  # _NUMBER_ACROSS
    bare_number: re.Pattern[str]  # _BARE_NUMBER (no \s in it: any ASCII text is read alike)
    digit: re.Pattern[str]  # _DIGIT


@cache
def _ascii() -> _AsciiPatterns:
    """The patterns compiled re.ASCII (for a text _plain_ascii accepts)."""
    def ascii_form(pattern: re.Pattern[str]) -> re.Pattern[str]:
        return re.compile(pattern.pattern, re.ASCII)
    return _AsciiPatterns(tuple(ascii_form(rule[1]) for rule in _FAST_RULES), ascii_form(_NUMBER_ACROSS),
                          ascii_form(_BARE_NUMBER), ascii_form(_DIGIT))


_KIND_OF_RULE = tuple(rule[0] for rule in _FAST_RULES)


def _plain_ascii(text: str) -> bool:
    """Whether ``text`` is read alike by a pattern compiled re.ASCII and by the same one compiled for Unicode."""
    return text.isascii() and not any(space in text for space in _UNICODE_ONLY_SPACES)
_FIRST_WORD_RULE = next(i for i, rule in enumerate(_FAST_RULES) if not rule[3])  # (the first that claims nothing)

_Findings = tuple[tuple[int, str], ...]
# The findings of units (words) by unit, for every text of the process. Bounded by the bytes its keys and values
# hold: once over, the older half is dropped (first remembered, first dropped: an LRU's bookkeeping would cost more
# per lookup than a word's reading saves). 32 MB hold ~150,000 words, the vocabulary of many sessions.
_UNIT_MEMO_BYTES = 32 * 1024 * 1024
_unit_memo: dict[str, _Findings] = {}
_unit_memo_bytes = 0
_unit_memo_lock = threading.Lock()
_NOTHING: _Findings = ()


def _extract(text: str) -> dict[str, list[str]]:
    # JSON-escaped text ("line\\nPython") must not read as the word "nPython".
    work = _ESCAPE.sub("  ", text) if "\\" in text else text
    if "[REDACTED:" in work:
        work = _REDACTED.sub(_spaces, work)
    units = list(dict.fromkeys(_units(work)))
    memo = _unit_memo
    known = list(map(memo.get, units))
    missing = list(compress(units, map(is_, known, repeat(None))))
    if missing:
        read = _read_units(missing)
        _remember(read)
        known = list(map(read.get, units, known))
    # (rule, value) pairs in the order of the units, then sorted by rule (stable: each rule's in order of the units).
    pairs = list(chain.from_iterable(filter(None, known)))
    pairs.sort(key=itemgetter(0))
    found: dict[str, list[str]] = {kind: [] for kind in ENTITY_KINDS}
    seen: set[str] = set()
    for rule, value in pairs:
        if value not in seen:
            seen.add(value)
            found[_KIND_OF_RULE[rule]].append(value)
    return found


def _remember(read: dict[str, _Findings]) -> None:
    global _unit_memo_bytes
    size = _units_size(read)
    if size > _UNIT_MEMO_BYTES:
        return
    with _unit_memo_lock:
        while _unit_memo_bytes + size > _UNIT_MEMO_BYTES and _unit_memo:
            # The older half goes (first remembered first: a dict keeps the order units were added in).
            dropped = {unit: _unit_memo[unit] for unit in islice(_unit_memo, max(1, len(_unit_memo) // 2))}
            for unit in dropped:
                del _unit_memo[unit]
            _unit_memo_bytes = max(0, _unit_memo_bytes - _units_size(dropped))
        _unit_memo.update(read)
        _unit_memo_bytes += size


def _units_size(read: dict[str, _Findings]) -> int:
    """About the bytes units and their findings hold: each unit and its entry, each finding with its value."""
    return sum(map(len, read)) + 150 * len(read) + 100 * sum(map(len, read.values()))


def _units(work: str) -> list[str]:
    """The units of ``work`` in order: its words, those a number may join kept together with what is between them."""
    across = _ascii().across if _plain_ascii(work) else _NUMBER_ACROSS
    if across.search(work) is None:
        return work.split()
    units: list[str] = []
    done = 0  # where the text not yet cut into units starts
    joined_start = joined_end = -1  # the unit of joined words being built
    size = len(work)
    for match in across.finditer(work):
        gap = match.start() + 1  # the whitespace character a number may cross
        start = gap
        while start > 0 and not work[start - 1].isspace():
            start -= 1
        end = gap + 1
        while end < size and not work[end].isspace():
            end += 1
        if start < joined_end:  # the word before the gap ends the unit being built: it goes on
            joined_end = end
            continue
        if joined_end >= 0:
            units.extend(work[done:joined_start].split())
            units.append(work[joined_start:joined_end])
            done = joined_end
        joined_start, joined_end = start, end
    units.extend(work[done:joined_start].split())
    units.append(work[joined_start:joined_end])
    units.extend(work[joined_end:].split())
    return units


def _read_units(units: list[str]) -> dict[str, _Findings]:
    """Each (distinct) unit's findings: ``(rule index, value)`` pairs by rule (as _FAST_RULES), then by place."""
    read = dict.fromkeys(units, _NOTHING)
    # A word of lower-case letters (a third of the new words of a session) holds nothing: every rule needs an
    # ASCII upper-case letter, a digit or a punctuation mark. (isalpha first: it stops at a word's first character
    # that is not a letter, islower reads every character of a word without a capital.)
    units = [unit for unit in units if not (unit.isalpha() and unit.islower())]
    if not units:
        return read
    work = list(units)  # each unit with what claiming rules took blanked
    everything = "  ".join(units)
    found: dict[int, list[tuple[int, str]]] = {}
    upper: list[int] | None = None
    claimed: set[int] = set()  # the units a claiming rule took something from
    ascii_only = _plain_ascii(everything)
    ascii_rules = _ascii().rules if ascii_only else ()
    for rule, (kind, pattern, accept, claims, needs) in enumerate(_FAST_RULES):
        if ascii_only:
            pattern = ascii_rules[rule]
        if rule == _FIRST_WORD_RULE and claimed:
            # What is left of a unit once claimed spans are blank: its pieces (the rules left treat any whitespace
            # alike, and blank spans would only be scanned for nothing).
            for i in claimed:
                work[i] = "  ".join(work[i].split())
        if needs is _PATH_LIKE:
            if _BARE_FILE.search(everything) is None:
                chosen = [i for i, unit in enumerate(work)
                          if "/" in unit or ("." in unit and _FILE_TAIL.search(unit) is not None)]
            else:
                chosen = [i for i, unit in enumerate(work)
                          if "/" in unit or ("." in unit and _FILE_TAIL.search(unit) is not None)
                          or _BARE_FILE.search(unit) is not None]
        elif needs is _DIGITS:
            if _DIGIT.search(everything) is None:
                continue
            chosen = list(range(len(work)))  # (a search per unit costs more than reading them all at once)
        elif needs is _UPPER:
            if upper is None:  # (the same units for both rules: no rule after the claiming ones blanks anything)
                upper = [i for i, unit in enumerate(work) if unit and not unit.islower()]
            chosen = upper
        elif needs is _NOT_ALPHA:
            # (_MIXED_ID: a unit without a digit holds no id; looking for one costs less than the rule's reading.)
            digit = _ascii().digit.search if ascii_only else _DIGIT.search
            chosen = [i for i, unit in enumerate(work) if unit and not unit.isalpha() and digit(unit)]
        else:
            present = [literal for literal in needs if literal in everything]
            if not present:
                continue
            if len(present) == 1:
                literal = present[0]
                chosen = [i for i, unit in enumerate(work) if literal in unit]
            else:
                hit: set[int] = set()
                for literal in present:
                    hit.update(i for i, unit in enumerate(work) if literal in unit)
                chosen = sorted(hit)
        if chosen:
            _run_rule(rule, kind, pattern, accept, claims, chosen, work, found, claimed)
    read.update((units[i], tuple(findings)) for i, findings in found.items())
    return read


def _run_rule(rule: int, kind: str, pattern: re.Pattern[str], accept: Callable[[str], bool], claims: bool,
              chosen: list[int], work: list[str], found: dict[int, list[tuple[int, str]]], claimed: set[int]) -> None:
    """One rule over the ``chosen`` units of ``work`` (joined by two spaces); claims blanked in ``work``."""
    if len(chosen) == 1:
        joined = work[chosen[0]]
        starts = [0]
    else:
        pieces = [work[i] for i in chosen]
        joined = "  ".join(pieces)
        starts = list(accumulate(map(add, map(len, pieces), repeat(2)), initial=0))
    group = 1 if pattern.groups else 0
    identifier = kind == "identifier"
    any_value = accept is _accept_any
    one = len(starts) == 1
    spans_by_unit: dict[int, list[tuple[int, int]]] = {}
    for match in pattern.finditer(joined):
        value = match.group(group).rstrip(_TRAILING)
        if identifier and value.endswith("()"):
            value = value[:-2]
        if len(value) < 3 if any_value else not value or not accept(value):
            continue
        start = match.start()
        k = 0 if one else bisect_right(starts, start) - 1
        found.setdefault(chosen[k], []).append((rule, value))
        if claims:
            spans_by_unit.setdefault(k, []).append((start - starts[k], match.end() - starts[k]))
    for k, spans in spans_by_unit.items():
        i = chosen[k]
        work[i] = _blank(work[i], spans)
        claimed.add(i)


def extract_entities_by_kind(text: str) -> dict[str, list[str]]:
    """Entities of ``text`` by kind, each list in order of first appearance, each value once across kinds.

    A text over :data:`MAX_READ_HEAD_CHARS` + :data:`MAX_READ_TAIL_CHARS` characters is read at its two ends.
    Results are remembered by text (see :func:`warm_entities`); every call returns fresh lists.
    """
    cached = _cached_entities(text)
    return {kind: list(values) for kind, values in cached}


def entity_kinds(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """:func:`extract_entities_by_kind` as the remembered pairs of kind and values (shared: nothing to copy)."""
    return _cached_entities(text)


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
# The same found from the line breaks (a literal the engine skips to; "^" is tried at every position), and at the start.
_LISTING_PREFIX_AFTER_BREAK = re.compile(r"\n\s*\d+[\t ]")
_LISTING_PREFIX_AT_START = re.compile(r"\s*\d+[\t ]")


def _without_line_numbers(text: str) -> str:
    """``_LISTING_PREFIX.sub(" ", text)``: each line's number column, with the whitespace before it, made one space."""
    first = _LISTING_PREFIX_AT_START.match(text)
    if first is not None:
        text = " " + text[first.end():]
    return _LISTING_PREFIX_AFTER_BREAK.sub("\n ", text) if "\n" in text else text


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
        read = _without_line_numbers(readable(text))
        cached = tuple((_ascii().bare_number if read.isascii() else _BARE_NUMBER).findall(read))
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
