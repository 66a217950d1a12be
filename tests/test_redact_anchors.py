"""Regexes tried only where their heads start (issue 22): the same matches, the same findings, as searching the text.

``contextfold.redact._anchors`` reads from a pattern's locating regex (or its need, or a case-sensitive regex) the
literal strings every match starts with; the automaton finds them with the triggers, and the regex is tried only
there. The reference is the redactor without the automaton, which searches every text as before.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.redact import Redactor, _scanner, _triggers
from contextfold.redact._anchors import MIN_HEAD_CHARS, heads, lowered_heads, search_at
from contextfold.redact._triggers import automaton_available
from contextfold.redact.rules import BUILTIN_PATTERNS

_TEXTS = [item.text for item in (*SECRETS, *CODE)]
needs_automaton = pytest.mark.skipif(not automaton_available(), reason="needs contextfold[fast] (ahocorasick-rs)")


def _anchored() -> list[tuple[re.Pattern[str], tuple[str, ...], bool]]:
    """Every regex the redactor tries at its heads: (regex, heads, run over the lower-cased text)."""
    out = []
    for p in BUILTIN_PATTERNS:
        for regex, over_lowered in ((p.locate, True), (p.needs, True)):
            if regex is not None and (found := heads(regex)) is not None:
                out.append((regex, found, over_lowered))
        if p.locate is None and p.starts is None and (found := lowered_heads(p.regex)) is not None:
            out.append((p.regex, found, False))
    return out


_ANCHORED = _anchored()
_ALL_HEADS = sorted({h for _, found, _ in _ANCHORED for h in found})


def _occurrences(text: str, head: str) -> list[int]:
    out, at = [], text.find(head)
    while at >= 0:
        out.append(at)
        at = text.find(head, at + 1)
    return out


def _same_as_searching(text: str) -> None:
    lowered = text.lower()
    where = {h: _occurrences(lowered, h) for h in _ALL_HEADS}
    for regex, found, over_lowered in _ANCHORED:
        if not over_lowered and len(lowered) != len(text):
            continue  # (the redactor searches such a text itself)
        subject = lowered if over_lowered else text
        expected = [(m.start(), m.end()) for m in regex.finditer(subject)]
        starts = sorted({at for h in found for at in where[h]})
        got = [(m.start(), m.end()) for m in search_at(regex, subject, starts)]
        assert got == expected, (regex.pattern, text)


def test_the_heads_cover_the_patterns_that_cost_most() -> None:
    # The locating regexes that read 50-60 ns a character: a quote or one of many words first.
    names = {p.locate.pattern for p in BUILTIN_PATTERNS if p.locate is not None and heads(p.locate)}
    assert any("parametername" in source for source in names)
    assert any("client[_-]?secret" in source for source in names)
    assert len(_ANCHORED) > 60
    assert min(map(len, _ALL_HEADS)) >= MIN_HEAD_CHARS


def test_heads_are_what_every_match_starts_with() -> None:
    assert heads(re.compile(r"[\"']?(?:name|key)[\"']?[ \t]*[:=]")) == ('"key', '"name', "'key", "'name", "key",
                                                                          "name")
    assert heads(re.compile(r"api[_-]?key|secret")) == ("api-key", "api_key", "apikey", "secret")
    assert heads(re.compile(r"\bpass(?:word)?\b")) == ("pass",)  # (an extension of a head is not listed)
    assert heads(re.compile(r"(?<![a-z])tok(?=en)")) == ("tok",)  # (look-arounds read nothing)


def test_no_heads_where_they_would_be_unsound_or_useless() -> None:
    assert heads(re.compile(r"(?i)password")) is None  # (case-insensitive: the Kelvin sign is a k)
    assert heads(re.compile(r"(?i:pass)word")) is None
    assert heads(re.compile(r"ab|password")) is None  # (a head shorter than MIN_HEAD_CHARS)
    assert heads(re.compile(r"[a-z]+=")) is None
    assert heads(re.compile(r"x?[a-z]+")) is None  # ("" is a head: a match may start with anything)
    assert heads(re.compile(r"x?password")) == ("password", "xpassword")
    assert lowered_heads(re.compile("é{2}xyz")) is None  # (é repeated: no head at all)
    assert lowered_heads(re.compile("éxyz")) is None  # (non-ASCII: may lower to another length)
    assert set(lowered_heads(re.compile("AKIA|abia")) or ()) == {"abia", "akia"}


def test_the_corpora_match_as_when_searched() -> None:
    for text in _TEXTS:
        _same_as_searching(text)


def _redactors() -> tuple[Redactor, Redactor]:
    """A redactor with the automaton (heads found with the triggers), and one without (every regex searches)."""
    fast = Redactor()
    fast.patterns
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_triggers, "_automaton", lambda triggers: None)
        slow = Redactor()
        slow.patterns
    assert not slow._scanner.triggers.one_pass and slow._scanner.triggers.read("password") is None
    return fast, slow


@needs_automaton
@pytest.mark.parametrize("heads_from", [0, _scanner._HEADS_MIN_CHARS])
def test_the_corpora_give_the_same_findings_as_without_the_automaton(heads_from: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scanner, "_HEADS_MIN_CHARS", heads_from)  # (0: every text is scanned with the heads)
    fast, slow = _redactors()
    assert fast._scanner.triggers.read("password") is not None
    for text in _TEXTS:
        assert fast._scanner.scan(text) == slow._scanner.scan(text), text


# Heads in every case, what follows a key (separators, quotes, values), and characters that lower-case to another
# length or that a case-insensitive match takes for an ASCII letter.
_FRAGMENTS = st.one_of(
    st.sampled_from(_ALL_HEADS),
    st.sampled_from(_ALL_HEADS).map(str.upper),
    st.sampled_from(_ALL_HEADS).map(str.title),
    st.sampled_from(["=", ":", ": ", " = ", "\"", "'", "\\\"", "=>", ":=", "==", "\n", " ", "\t", ",", ";", "<", ">",
                     "</password>", "_", "-", ".", "/", "@", "://u:", "value: ", "Xk9mQ3horse77Bb", "hunter2",
                     "sk-proj-abcdefghijklmnopqrstuvwx", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", "0123456789abcdef" * 3,
                     "ſ", "\u212a", "İ", "é", "\udc00", "machine h login u password ", "-p"]),
)


_BOTH: list[tuple[Redactor, Redactor]] = []


@needs_automaton
@settings(max_examples=100, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=16).map("".join))
def test_generated_texts_give_the_same_findings_as_searching(text: str) -> None:
    _same_as_searching(text)
    if not _BOTH:
        _BOTH.append(_redactors())
    fast, slow = _BOTH[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_scanner, "_HEADS_MIN_CHARS", 0)  # (the generated texts are short: scanned with the heads)
        assert fast._scanner.scan(text) == slow._scanner.scan(text)


_COOKIE_RULE = next(p for p in BUILTIN_PATTERNS if p.name == "session_cookie")


def test_the_cookie_rule_is_located_wherever_its_case_insensitive_regex_can_match() -> None:
    # Each character the case-insensitive regex takes for one of "cookie:" lower-cases to one its locating regex
    # takes at that place, or to more than one character (then the whole text is searched).
    assert _COOKIE_RULE.locate is not None
    for at, letter in enumerate("cookie"):
        takes = re.compile(f"(?i){letter}")
        for code in range(0x10000):
            char = chr(code)
            if 0xD800 <= code <= 0xDFFF or not takes.fullmatch(char) or len(char.lower()) != 1:
                continue
            spelled = "cookie:"[:at] + char.lower() + "cookie:"[at + 1 :]
            assert _COOKIE_RULE.locate.fullmatch(spelled), (letter, char)


@settings(max_examples=150, deadline=None)
@example("Cookie:sessionid=Cookie:sessionid=Cookie:Cookie:")  # (a match inside another's value: taken too)
@example("Cookie: a=...Cookie:sessionid=Xk9mQ3hR7tB2vN8p")  # (and when the outer one is turned down)
@given(st.lists(st.sampled_from(["Cookie:", "cookie:", "COOKIE: ", "cook\u0131e:", "COOK\u0130E:", "\u212aookie:",
                                 "coo\u212aie:", ";", "; ", "sessionid=", "sid=", "Xk9mQ3hR7tB2vN8pL4wZ", "=", " ",
                                 "\n", "a", "é", "..."]), max_size=12).map("".join))
def test_the_cookie_rule_finds_what_its_regex_finds_at_each_place(text: str) -> None:
    """The regex tried where every header (``cookie:``) or ``;`` starts, as the reference scan of redteam8 does."""
    lowered = text.lower()
    assert _COOKIE_RULE.locate is not None
    if len(lowered) == len(text):
        found = (_COOKIE_RULE.regex.match(text, at.start()) for at in _COOKIE_RULE.locate.finditer(lowered))
        matches = [m for m in found if m is not None]
    else:
        matches = list(_COOKIE_RULE.regex.finditer(text))
    expected = [(m.span(), _COOKIE_RULE.accept(m) if _COOKIE_RULE.accept else True) for m in matches]
    expected_found = [span for span, verdict in expected if verdict]
    assert [m.span() for m, _ in _COOKIE_RULE.findings(text)] == expected_found


def test_a_python_the_private_parser_was_not_checked_on_gets_no_heads_and_the_same_findings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # ``re._parser`` is private: on a Python whose parser nobody checked, every regex is searched as before.
    from contextfold.redact import _anchors

    checked = Redactor()
    monkeypatch.setattr(_anchors.sys, "version_info", (3, 99, 0, "final", 0))
    heads.cache_clear()
    lowered_heads.cache_clear()
    try:
        unchecked = Redactor()
        assert all(heads(regex) is None for regex, _, _ in _ANCHORED)
        assert unchecked._scanner.scan("password") is not None and unchecked._scanner.located_heads == (None,) * len(
            unchecked._scanner.located_heads)
        for text in _TEXTS:
            assert unchecked._scanner.scan(text) == checked._scanner.scan(text), text
    finally:
        heads.cache_clear()
        lowered_heads.cache_clear()


def test_a_cookie_header_repeated_on_one_line_has_its_value_redacted() -> None:
    """``Cookie: sessionid=Cookie: sessionid=<value>``: the first match (value ``Cookie:``) is turned down; the
    header inside it was not tried, and the session id stayed in clear (found by redteam8's reference test)."""
    text = "Cookie: sessionid=Cookie: sessionid=anchors5c1Xk9mQ3hR7tB2"
    assert "anchors5c1Xk9mQ3hR7tB2" not in Redactor().redact_text(text)
