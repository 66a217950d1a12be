"""Base64 runs found without the regex engine (issue 22): the same runs, the same findings, the same suspects.

``contextfold.redact._runs`` finds runs of a character class with ``bytes.translate``; the ``encoded_secret`` rule
tries its regex only where such a run starts, and the bulk prefilter looks for its need (``[a-z0-9+/]{24,}``) that
way. Each must answer exactly what the regex alone answers.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._runs import ClassRuns, class_runs
from contextfold.redact.rules import BUILTIN_PATTERNS

_TEXTS = [item.text for item in (*SECRETS, *CODE)]
_ENCODED = next(p for p in BUILTIN_PATTERNS if p.name == "encoded_secret")
_NEED = re.compile(r"[a-z0-9+/]{24,}")
# Characters at the edges of a run: in it, beside it (=, _, - end a base64 run), non-ASCII (é, the Kelvin sign that
# lower-cases to k, İ that lower-cases to two characters, a lone surrogate) and the batch separator.
_ALPHABET = st.sampled_from(["a", "Z", "9", "+", "/", "=", "_", "-", " ", "\n", "é", "\u212a", "İ", "\udc00", "\x00",
                             "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", "c2stcHJvai1hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3g="])
_GENERATED = st.lists(_ALPHABET, max_size=40).map("".join)


def _regex_findings(text: str) -> list[tuple[int, int, str]]:
    found = [m for m in _ENCODED.regex.finditer(text) if _ENCODED.accept is None or _ENCODED.accept(m)]
    return [(m.start(), m.end(), m.group()) for m in found]


def _findings(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m, _ in _ENCODED.findings(text)]


def test_the_need_of_encoded_secrets_is_found_as_runs() -> None:
    runs = class_runs(_NEED)
    assert runs is not None and runs.min_chars == 24
    assert class_runs(re.compile(r"[a-z0-9+/]{24,}", re.IGNORECASE)) is None  # (only what it can answer alike)
    assert class_runs(re.compile(r"[^a-z]{24,}")) is None
    assert class_runs(re.compile(r"pat(?:\\?[\"'])?[ \t]*[:=]")) is None


def test_runs_and_the_regex_agree_on_the_corpora() -> None:
    runs = class_runs(_NEED)
    assert runs is not None
    for text in _TEXTS:
        lowered = text.lower()
        assert runs.holds(lowered) == bool(_NEED.search(lowered)), text
        assert _findings(text) == _regex_findings(text), text


@settings(max_examples=400, deadline=None)
@given(_GENERATED)
def test_runs_and_the_regex_agree_on_generated_text(text: str) -> None:
    runs = class_runs(_NEED)
    assert runs is not None
    lowered = text.lower()
    assert runs.holds(lowered) == bool(_NEED.search(lowered))
    assert runs.holds(text) == bool(_NEED.search(text))
    assert _findings(text) == _regex_findings(text)
    starts = ClassRuns.of_chars("A-Za-z0-9+/", 24).starts(text)  # (non-ASCII text too: issue 22)
    expected = [m.start() for m in re.finditer(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{24,}", text)]
    assert starts == expected


_PREFILTERING = Redactor()


@settings(max_examples=150, deadline=None)
@given(st.lists(_GENERATED, min_size=1, max_size=6))
def test_the_bulk_prefilter_suspects_what_the_regex_would(texts: list[str]) -> None:
    redactor = _PREFILTERING
    redactor.patterns
    suspects: set[int] = set()
    redactor._scanner.suspect_texts(texts, suspects)
    lowered = [t.lower() for t in texts]
    for i, text in enumerate(lowered):
        # (Every text the scan finds a secret in; of the others, only some holding a trigger or a run: see ._gate.)
        if redactor._scanner.scan(texts[i]):
            assert i in suspects, texts[i]
        if i in suspects:
            assert _NEED.search(text) or redactor._scanner.triggers.holds_any(text), texts[i]


def test_a_base64_secret_is_still_caught_at_a_run_start_only() -> None:
    encoded = "c2stcHJvai1hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3g="  # sk-proj-abcdefghijklmnopqrstuvwx, base64
    redactor = Redactor(remember=False)
    assert redactor.redact_text(f"data: {encoded} end") == "data: [REDACTED:encoded_secret] end"
    assert redactor.redact_text(f"x_{encoded}") == f"x_{encoded}"  # (inside a longer token: not a run of its own)
    out = redactor.redact_messages([Message.tool("c1", f"data {encoded}"), Message.tool("c2", "nothing here")])
    assert out[0].text == "data [REDACTED:encoded_secret]" and out[1].text == "nothing here"


@pytest.mark.parametrize("chars", ["a-z0-9+/", "A-Za-z", "+-/", "a-"])
def test_a_class_body_reads_as_the_regex_reads_it(chars: str) -> None:
    runs = ClassRuns.of_chars(chars, 1)
    regex = re.compile(f"[{chars}]")
    for code in range(128):
        assert runs.holds(chr(code)) == bool(regex.fullmatch(chr(code))), (chars, chr(code))


def test_a_run_turned_down_from_its_opening_is_one_the_rule_turns_down() -> None:
    # Issue 22: a run whose first two characters cannot open UTF-8 text when decoded, and that is not an AWS secret
    # key's length, is passed over without the regex or the decoding; every opening, lengths around 40, paddings.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = "Xk9mQ3hR7tB2vN8pL4wZ6cF1jD5gH0sKa8Yq"
    skipped = 0
    for a in alphabet:
        for b in alphabet:
            # (40 characters with 0, 1 or 2 "=": an AWS key's length, never passed over; 3 "=": no match at all)
            for size, padding in ((22, ""), (22, "="), (38, ""), (37, "="), (36, "=="), (38, "===")):
                text = f"x {a}{b}{body[:size]}{padding} y"
                assert _findings(text) == _regex_findings(text), text
                skipped += _ENCODED.rejects is not None and _ENCODED.rejects(text, 2, 4 + size)
    assert skipped > 4_000  # (1,232 of the 4,096 openings: "/", "+", "g"-"v", some of "w" and "9")
