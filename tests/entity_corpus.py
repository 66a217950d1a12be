"""A generated corpus for entity extraction's golden results (tests/golden/entities/corpus.json).

Texts are built from pieces the rules care about (paths, numbers and units side by side, line-numbered listings,
definitions, escapes, redaction markers, non-ASCII letters and whitespace), deterministically from a seed: the same
texts on every Python version (``random.Random`` with ``choice`` and ``randrange``). The golden file holds a hash of
what each text gives (entities by kind, bare numbers, digest material), computed by the tree before issue 22's
compiled-speed rewrite; ``test_entities_golden.py`` checks the current tree gives the same.
"""

from __future__ import annotations

import hashlib
import json
import random

from contextfold.cache._digest import digest_material
from contextfold.summarize.entities import bare_numbers, extract_entities_by_kind

CORPUS_SEED = 22
CORPUS_TEXTS = 600

_PIECES = (
    " ", "  ", "\n", "\t", "\r\n", "\\n", "\\t", "/", "./", "../", "~/", ".", "..", "-", "--", "_", "@", "+", "<", ">",
    "(", ")", "()", "`", "$", ",", ":", "::", "T", "v", "0", "1", "12", "2024-05-20", "10:30", "3.5", "1.2.3", "ms",
    "s", "GB", "%", "x", "a", "py", ".py", "test", "Test", "_test", "test_", "Error", "Exception", "Value", "JFK",
    "HAT136", "Makefile", "README", "src", "foo", "Foo", "fooBar", "é", "https://", "http", "://", "e.g", "1st",
    "mia.li@example.com", "tests/a.py::T::t", "[", "]", "'", '"', "\u2028", "\xa0", "\x1c", "\x1f", "٣", "Ⅻ",
    "[REDACTED:password]", "files", "tests", "USD", "$1,234.50", "v2.0.1-rc1", "10:30:45", "1,", "sec", "KiB",
    "--dry-run", "self.value", "os.path.join(", "get_value", "XMLHttpRequest", "ValueError:", "`x_y`", "x2y",
    "42", "4096", "306.5", "12,345", "0.5", "-7", "#123", "a1b2c3d4", "ZZ9", "ABC", "def", "class", "async",
)
_LINES = (
    "Traceback (most recent call last):", '  File "/testbed/django/db/models/query.py", line 123, in get',
    "    raise self.model.DoesNotExist(", "django.core.exceptions.ObjectDoesNotExist: matching query",
    "FAILED tests/test_x.py::TestThing::test_case[param-1] - AssertionError: 3 != 4",
    "===== 12 passed, 3 failed in 4.56s =====", "Ran 42 tests in 0.123s", "OK (skipped=2)",
    '{"reservation_id": "ZFA04Y", "flight_number": "HAT136", "price": 1234, "date": "2024-05-20"}',
    "drwxr-xr-x  2 root root 4096 May 20 10:30 src", "-rw-r--r--  1 root root  306 Jan  1 00:00 setup.py",
    "2024-05-20T10:30:45 INFO worker-3 took 120 ms for 3 files", "See https://example.com/a/b?c=1 and docs/x.md.",
    "pip install numpy==1.26.4 --no-deps", "export PATH=/usr/local/bin:$PATH", "e.g. use `pytest -k name`",
    "Use camelCase and snake_case_name and CONSTANT_NAME.", "It costs $12.50 (3 bags, 2 passengers).",
    "The file README.md and Makefile are at the root; also LICENSE.", "error: cannot find -lfoo 3 times",
    "Ünïcödé wörds and 日本語 text with 12 ms", "version v1.2.3.post1 and 1.2.3-beta", "x = 4096  # 12 items",
)


def _numbered_listing(rng: random.Random) -> str:
    start = rng.randrange(1, 900)
    code = ("def handler(request):", "    return value", "class Parser(Base):", "    async def fetch(self, url):",
            "    x = compute(4096, 12)", "", "function go() {", "struct Point {", "    # 3 s timeout")
    gaps = ("\t", " ", "  ")
    return "\n".join(f"{' ' * rng.randrange(0, 5)}{start + i}{rng.choice(gaps)}{rng.choice(code)}"
                     for i in range(rng.randrange(1, 40)))


def corpus_texts() -> list[str]:
    """The corpus: CORPUS_TEXTS texts of pieces and lines, some long enough to be read at their two ends."""
    rng = random.Random(CORPUS_SEED)
    texts: list[str] = []
    for index in range(CORPUS_TEXTS):
        kind = index % 4
        if kind == 0:
            text = "".join(rng.choice(_PIECES) for _ in range(rng.randrange(1, 60)))
        elif kind == 1:
            text = "\n".join(rng.choice(_LINES) for _ in range(rng.randrange(1, 30)))
        elif kind == 2:
            text = _numbered_listing(rng)
        else:  # long: pieces, lines and listings, past the digest's two windows
            parts = []
            while sum(map(len, parts)) < rng.randrange(3_100, 5_000):
                choice = rng.randrange(3)
                parts.append("".join(rng.choice(_PIECES) for _ in range(rng.randrange(1, 40))) if choice == 0
                             else rng.choice(_LINES) if choice == 1 else _numbered_listing(rng))
            text = rng.choice(("\n", " ", "")).join(parts)
        texts.append(text)
    return texts


def reading_hash(text: str) -> str:
    """A hash of what ``text`` gives: its entities by kind, its bare numbers, its digest material."""
    material = digest_material(text)
    found = [extract_entities_by_kind(text), bare_numbers(text), list(material.items), material.partial]
    return hashlib.sha256(json.dumps(found, ensure_ascii=False).encode()).hexdigest()[:16]
