r"""A text as a remembered secret may stand in it once its escapes are read and its wrapped lines joined.

A value the memory remembers comes back written in ways no finite list of its forms covers: an encoder that escapes
some characters as ``\u0070`` or ``&#x2F;`` and not others (or every one), a base64 body or a long token wrapped at
64 or 76 columns at whatever place the value falls, a shell command continued with ``\`` and a newline inside it, a
hex dump in upper case. Such a text is searched a second time as its *view*: each escape replaced by the character
it stands for, each such line break taken out, upper-case hex runs lowered; a remembered string found in the view is
redacted over the characters of the text it came from (the whole escape, the break with it).

Only texts holding one of those shapes have a view (most have none: one regex search says so). What may reveal that
a string found in a view is in a text literally (for the caches that keep a redaction until a string learned since
occurs in the text, see :func:`view_needles`): an escape's opening, one half of the string (a string broken by one
line break keeps one of its halves whole), its upper-case form (hex).
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import html
import re

__all__ = ["ESCAPE_NEEDLES", "ESCAPE_NEEDLE_RE", "DecodedRuns", "TextView", "decoded_runs", "view_needles", "view_of"]

# The named character references of ASCII punctuation (what an HTML escaper writes besides numeric ones).
# (Those of base64's and URLs' punctuation only: each is a needle every cache checks a text for after a learn.)
_NAMED = ("amp", "lt", "gt", "quot", "apos", "sol", "plus", "equals")
# Escapes of printable ASCII read in a view: JSON's \u00XX, HTML's numeric character references and the named ones
# HTML escapers write for ASCII punctuation (``&sol;``, ``&plus;`` …: html.unescape reads them). Not the escapes of
# other characters: ``\u00e9`` is in every JSON document written with ensure_ascii, and a text holding one would be
# redacted again whenever a secret is learned (see ESCAPE_NEEDLES); a value's fully escaped form is remembered.
_ESCAPE_RE = re.compile(r"\\u(00[2-7][0-9a-fA-F])|&#0*([3-9][0-9]|1[01][0-9]|12[0-6]);|&#[xX]0*([2-7][0-9a-fA-F]);"
                        r"|&(?:" + "|".join(_NAMED) + ");"
                        # A shell command continued on the next line, in a word (the break read as nothing).
                        r"|\\(?<=[A-Za-z0-9+/=_.~-]\\)\r?\n[ \t]*(?=[A-Za-z0-9+/=_.~-])"
                        # A JSON string's escaped line break inside base64 or a token at least 16 characters long.
                        # (The literal first: a look behind tried at every place cost more than the rest.)
                        r"|\\n(?<=[A-Za-z0-9+/=_-]{16}\\n)(?=[A-Za-z0-9+/=_-])")
# A line break inside a wrapped token: after a line that is one token of 16 characters or more (a PEM or base64
# body, a hex dump, a key folded on its own lines; indented in YAML), or inside a word after a line of 60 characters or
# more (a terminal or `fold` wrapping at 60 to 80 columns cuts wherever the column falls, in a value too).
_WRAP_RE = re.compile(r"^[ \t]*[A-Za-z0-9+/=_-]{16,}(\r?\n[ \t]*)(?=[A-Za-z0-9+/=_-])"
                      r"|^[^\n]{59,}(?<=\S)(\r?\n)(?=\S)", re.MULTILINE)
# A run of upper-case hex (with a letter and a digit) that a hex form remembered in lower case stands in.
_UPPER_HEX_RE = re.compile(r"[0-9A-F]{12,}")
# The literal openings of what a view reads as something else (see view_needles).
ESCAPE_NEEDLES = (*(f"\\u00{digit}" for digit in "234567"), "&#", *(f"&{name};" for name in _NAMED))
# Whether a text holds one of them, in one pass (one search each cost a stale cached text ~40 of them).
ESCAPE_NEEDLE_RE = re.compile("|".join(re.escape(needle) for needle in ESCAPE_NEEDLES))


class TextView:
    """A text with its escapes read, its wrapped tokens joined and its upper-case hex lowered; spans map back.

    ``replaced``: ``(view start, view end, text start, text end, same length)`` of each piece of the view that
    stands for other characters of the text (an escape, a break: a view end equal to its start), in order.
    """

    __slots__ = ("replaced", "starts", "text")

    def __init__(self, text: str, replaced: list[tuple[int, int, int, int, bool]]) -> None:
        self.text = text
        self.replaced = replaced
        self.starts = [r[0] for r in replaced]

    def _char(self, p: int) -> tuple[int, int]:
        """The characters of the original text that character ``p`` of the view stands for."""
        # (The last piece starting at or before p: of a break and an escape at one place, the escape, added later.)
        i = bisect.bisect_right(self.starts, p) - 1
        if i < 0:
            return p, p + 1
        vs, ve, ts, te, same = self.replaced[i]
        if p < ve:
            return (ts + p - vs, ts + p - vs + 1) if same else (ts, te)
        return te + p - ve, te + p - ve + 1

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text the view's ``start:end`` (not empty) stands for."""
        return self._char(start)[0], self._char(end - 1)[1]


def view_of(text: str) -> TextView | None:
    """``text``'s view, or None when it has none (no escape, no wrapped token, no upper-case hex run)."""
    # (start, end, replacement, same length) of each piece replaced, from the passes below (they never overlap:
    # an escape holds no line break a wrap takes out, and upper-case hex no escape's characters but its digits).
    pieces: list[tuple[int, int, str, bool]] = []
    for m in _ESCAPE_RE.finditer(text):
        read = _read_escape(m)
        if read is not None:
            pieces.append((m.start(), m.end(), read, False))
    for m in _WRAP_RE.finditer(text):
        group = 1 if m.start(1) >= 0 else 2
        pieces.append((m.start(group), m.end(group), "", False))
    if pieces:
        pieces.sort()
        taken = [(s, e) for s, e, _, _ in pieces]
    else:
        taken = []
    for m in _UPPER_HEX_RE.finditer(text):
        if m.group().isdigit() or m.group().isalpha():
            continue
        s, e = m.span()
        if taken and _overlaps(taken, s, e):  # (the hex digits of an escape: read with it)
            continue
        pieces.append((s, e, m.group().lower(), True))
    if not pieces:
        return None
    pieces.sort()
    out: list[str] = []
    replaced: list[tuple[int, int, int, int, bool]] = []
    at = length = 0
    for start, end, replacement, same in pieces:
        if start < at:  # (two passes claiming one character: the first one kept)
            continue
        out.append(text[at:start])
        length += start - at
        out.append(replacement)
        replaced.append((length, length + len(replacement), start, end, same))
        length += len(replacement)
        at = end
    out.append(text[at:])
    return TextView("".join(out), replaced)


def _overlaps(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    i = bisect.bisect_right(taken, (start, len(taken) and 1 << 62)) - 1
    for s, e in taken[max(i, 0):]:
        if s >= end:
            return False
        if e > start:
            return True
    return False


def _read_escape(m: re.Match[str]) -> str | None:
    """The character an escape stands for (nothing for a line break), or None when it stands for none."""
    unit, decimal, hexadecimal = m.groups()
    token = m.group()
    if unit is not None or hexadecimal is not None:
        return chr(int(unit or hexadecimal, 16))
    if decimal is not None:
        return chr(int(decimal))
    if token[0] == "&":
        read = html.unescape(token)
        return read if read != token else None
    return ""  # (a line break inside a word or a token)


# A run that may be base64 or hex holding a remembered string at any offset (16 characters or more; hex from 12).
# Base64 of 12 bytes or more has both cases (but about once in 5,000): a run without (a path, a word, an
# identifier in snake case) is not decoded. Hex: a digit and a letter.
_RUN_RE = re.compile(r"[A-Za-z0-9+/_-]{16,}")
_HEX_RUN_RE = re.compile(r"[0-9a-fA-F]{12,}")
_URL_SAFE = str.maketrans("-_", "+/")


class DecodedRuns:
    """The base64 and hex runs of a text decoded (bytes as Latin-1 characters), one after another, with a map back.

    ``text``: each run's bytes followed by a line break. ``runs``: ``(start in text, end, start in the original,
    end, bits per character)`` of each (6 for base64, 4 for hex). A run is decoded from its first character: a value
    is found at whichever byte it starts (the three alignments of base64), the characters that mix its bits with
    its neighbours' redacted with it.
    """

    __slots__ = ("runs", "starts", "text")

    def __init__(self, text: str, runs: list[tuple[int, int, int, int, int]]) -> None:
        self.text = text
        self.runs = runs
        self.starts = [r[0] for r in runs]

    def span(self, start: int, end: int) -> tuple[int, int] | None:
        """The original characters the decoded ``start:end`` stands in; None when it runs across two runs."""
        i = bisect.bisect_right(self.starts, start) - 1
        ds, de, ts, te, bits = self.runs[i]
        if end > de:
            return None
        return ts + (8 * (start - ds)) // bits, min(te, ts + -(-8 * (end - ds) // bits))


def decoded_runs(text: str) -> DecodedRuns | None:
    """``text``'s base64 runs of 16 characters or more and hex runs of 12 or more, decoded; None when none."""
    pieces: list[str] = []
    runs: list[tuple[int, int, int, int, int]] = []
    length = 0
    found: list[tuple[int, int, bytes, int]] = []
    for m in _RUN_RE.finditer(text):
        run = m.group()
        if run.islower() or run.isupper():
            continue
        usable = run[: len(run) & ~3].translate(_URL_SAFE)
        with contextlib.suppress(ValueError):  # (a "=" cannot be inside: the run holds none)
            found.append((m.start(), m.end(), base64.b64decode(usable), 6))
    for m in _HEX_RUN_RE.finditer(text):
        # (An odd run at both alignments: a hex dump joined to the word after it, or one digit of what precedes it.)
        start, end = m.span()
        if m.group().isdigit() or m.group().isalpha():
            continue
        found.append((start, start + ((end - start) & ~1), bytes.fromhex(text[start : start + ((end - start) & ~1)]),
                      4))
        if (end - start) & 1:
            found.append((start + 1, end, bytes.fromhex(text[start + 1 : end]), 4))
    for start, end, data, bits in found:
        decoded = data.decode("latin-1")
        pieces.append(decoded)
        runs.append((length, length + len(decoded), start, end, bits))
        length += len(decoded) + 1
    if not runs:
        return None
    return DecodedRuns("\n".join(pieces), runs)


def encoded_needles(remembered: str, complete: bool = True) -> list[str]:
    """What a text holds literally where ``remembered`` is in one of its runs decoded (see :func:`decoded_runs`).

    The halves of its base64 characters at each alignment (whole, or a line break inside them: one half whole) and
    of its hex, in lower and upper case. Only for ASCII strings: a decoded run is read as Latin-1.
    """
    if not remembered.isascii():
        return []
    raw = remembered.encode("ascii")
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw).decode("ascii")
        # Character j holds bits 6j to 6j+6: the value's alone from the first past its offset to the last within it.
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(raw)) // 6]
        cores.append(core)
        url_safe = core.replace("+", "-").replace("/", "_")
        if url_safe != core:
            cores.append(url_safe)
    hexed = raw.hex()
    cores.extend((hexed, hexed.upper()))
    return [half for core in cores if core for half in _halves(core, complete)]


def _halves(text: str, complete: bool) -> tuple[str, ...]:
    """The two halves of ``text``: one of them is whole where one line break cuts it.

    ``text`` itself when shorter than 12 characters (``complete``) or 16: halves of 3 to 5 characters are in most
    texts (``ame`` of a remembered ``sésame`` in every ``name``), whose views would then all be read (the cold
    redaction of real outputs cost 3.6 times base's), and each text redone at every learn.
    """
    if len(text) < (_HALVED_MIN_CHARS if complete else _HALVED_MIN_CHARS_KEPT):
        return (text,)
    half = (len(text) + 1) // 2
    return text[:half], text[len(text) - half:]


def view_needles(remembered: str, complete: bool = True, encoded: bool = True) -> list[str]:
    """Strings one of which a text holds literally when ``remembered`` occurs in its view but not in it.

    Its halves when it has no spaces (a line break inside it leaves one of them whole), the halves of its base64 and
    hex forms (:func:`encoded_needles`), its upper-case form when it is lower-case hex (an upper-case hex run
    lowered); the openings of the escapes a view reads are :data:`ESCAPE_NEEDLES`. ``complete``: what decides
    whether a text's view is read at all; a string (or form) shorter than 12 characters is its own needle, not
    halved: such a string broken by a line break is not found (a fold or a wrap cutting a short password). Else the
    ones a cache of redactions made before the string was learned is checked against: not halved under 16
    characters, and a string with spaces has no halves (they are common words, and every text holding one would be
    redone at every learn); so such a string broken by a line break, or any string broken by two breaks or more
    (wrapped twice, it is longer than 60 characters: a PEM body's lines are remembered), is found in a text redacted
    after it is learned, not in one redacted before and kept. ``encoded``: with the needles of its base64 and hex
    (the memory asks them of a value found, not of each form it remembers with it: a value's URL-encoded form inside
    base64 is not looked for; ~60 needles a value made the ledger's check after a learn 10x slower).
    """
    needles = list(_halves(remembered, complete)) if complete or _TOKEN_RE.fullmatch(remembered) else []
    if encoded:
        needles.extend(encoded_needles(remembered, complete))
    upper = remembered.upper()
    if upper != remembered and _LOWER_HEX_RE.fullmatch(remembered):
        needles.append(upper)
    # A needle's head is one too (where the needle is, its head is): an automaton of a long value's halves and
    # cores, thousands of characters (a text a timed-out pattern made one secret), took 10 s to build.
    return [needle[:_NEEDLE_MAX_CHARS] for needle in needles]


_LOWER_HEX_RE = re.compile(r"[0-9a-f]+")
_HALVED_MIN_CHARS = 12
_NEEDLE_MAX_CHARS = 32
_HALVED_MIN_CHARS_KEPT = 16
# A remembered string without spaces: one a view's line break can be in (see view_needles).
_TOKEN_RE = re.compile(r"\S+")
