"""The session's secret memory finds what it remembers the same way whatever the text's length and history."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor
from contextfold.redact.memory import SecretMemory

# Few letters, so that remembered strings overlap, share heads and repeat in the texts.
_ALPHABET = "ab1=-"
_values = st.lists(st.text(_ALPHABET, min_size=6, max_size=14), min_size=1, max_size=8)


def _plain_spans(table: dict[str, str], text: str) -> list[tuple[int, int, str]]:
    """The definition: every occurrence, leftmost first, of two at one place the longer, no overlaps."""
    found = sorted((at, -(at + len(s)), kind) for s, kind in table.items()
                   for at in range(len(text)) if text.startswith(s, at))
    out: list[tuple[int, int, str]] = []
    last = -1
    for start, neg_end, kind in found:
        if start >= last:
            out.append((start, -neg_end, kind))
            last = -neg_end
    return out


def _memory(values: list[str]) -> SecretMemory:
    memory = SecretMemory()
    for i, value in enumerate(values):
        memory.learn(value, f"kind{i}")
    return memory


@settings(max_examples=60, deadline=None)
@given(_values, st.text(_ALPHABET + "x", max_size=1_200))
def test_spans_of_short_and_long_texts_follow_the_definition(values: list[str], text: str) -> None:
    memory = _memory(values)
    assert memory.spans(text) == _plain_spans(dict(memory.table), text)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(_ALPHABET, min_size=6, max_size=14), min_size=12, max_size=16), st.text(_ALPHABET, max_size=11))
def test_a_short_text_searched_position_by_position_follows_the_definition(values: list[str], text: str) -> None:
    # More remembered strings than characters: each position is looked up (otherwise a find per string, issue 22).
    memory = _memory(values)
    assert memory.spans(text) == _plain_spans(dict(memory.table), text)


@settings(max_examples=40, deadline=None)
@given(_values, _values, st.text(_ALPHABET, min_size=513, max_size=700))
def test_a_text_searched_before_finds_what_was_learned_since(first: list[str], later: list[str], text: str) -> None:
    memory = _memory(first)
    memory.spans(text)  # remembered with what the memory knew then
    for value in later:
        memory.learn(value, "later")
    assert memory.spans(text) == _plain_spans(dict(memory.table), text)


@settings(max_examples=100, deadline=None)
@given(_values, st.text(_ALPHABET + "x", max_size=40))
def test_a_word_shares_a_piece_exactly_when_five_characters_of_it_are_remembered(values: list[str], word: str) -> None:
    memory = _memory(values)
    pieces = {s[i : i + 5] for s in memory.table for i in range(len(s) - 4)}
    assert memory.shares_piece(word) == any(word[i : i + 5] in pieces for i in range(len(word) - 4))


def test_a_line_of_a_key_block_is_redacted_without_the_header_that_made_it_recognisable() -> None:
    # A page or a grep that starts inside a PEM block shows its lines alone; base64's + and / cut them into runs
    # of letters and digits too short to remember (the e2e secrets test found one in `contextfold cache grep`).
    from contextfold.redact import Redactor

    body = ["Ab1+Cd2/Ef3+Gh4/Ij5+Kl6/Mn7+Op8/Qr9+St0/Uv1+Wx2/Yz3+aB4/cD5+eF6/", "gH7+iJ8/kL9+mN0/oP1+qR2=="]
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END PRIVATE KEY-----"
    for written in (pem, json.dumps(pem)[1:-1]):  # as it stands in a file, and inside JSON text
        redactor = Redactor()
        assert "[REDACTED:private_key]" in redactor.redact_text(f"the key:\n{written}\n")
        for n, line in enumerate(body, start=2):
            assert line not in redactor.redact_text(f"tout_0123456789abcdef:{n}:{line}")
    assert "-----BEGIN PRIVATE KEY-----" in Redactor().redact_text('marker = "-----BEGIN PRIVATE KEY-----"')


_REDACTOR = Redactor()  # (its patterns are compiled once, for every example)
_asks = st.lists(st.tuples(st.sampled_from(("ask", "ask", "learn")), st.text(_ALPHABET + "x", min_size=1, max_size=16)),
                 max_size=30)


@settings(max_examples=40, deadline=None)
@given(_asks)
def test_mentions_secret_remembered_answers_are_the_answers_read_again(ops: list[tuple[str, str]]) -> None:
    # A digest asks about the same words output after output (issue 22): the redactor keeps its answers while the
    # memory learns nothing new. A copy with no answers kept (for_session starts its own) reads the word again.
    redactor = _REDACTOR.for_session(SecretMemory())
    other = redactor.for_session(SecretMemory())  # another session's: it must not get this one's answers
    for kind, word in ops:
        if kind == "learn":
            redactor.learn(word, "password")
            continue
        assert redactor.mentions_secret(word) == redactor.for_session(redactor.memory).mentions_secret(word)
        assert other.mentions_secret(word) == other.for_session(other.memory).mentions_secret(word)
    for _, word in ops:
        assert redactor.mentions_secret(word) == redactor.for_session(redactor.memory).mentions_secret(word)


def test_the_url_forms_of_javascript_and_dotnet_keeping_marks_are_remembered() -> None:
    # review of lane T: encodeURIComponent and .NET's UrlEncode leave ! ' ( ) * as they are, every form kept escaped
    # them ("Hunter2!xyz#9" came back from a Node tool's query string as "Hunter2!xyz%239", not redacted)
    memory = SecretMemory()
    memory.learn("Hunt3r!(q*x'/#9 rev18tn", "password")
    for encoded in ("Hunt3r!(q*x'%2F%239%20rev18tn",  # JavaScript's encodeURIComponent
                    "Hunt3r!(q*x%27%2F%239+rev18tn",  # .NET's WebUtility.UrlEncode
                    "Hunt3r!(q*x%27%2f%239+rev18tn"):  # .NET's HttpUtility.UrlEncode
        text = f"GET https://api.example.com/v1/verify?key={encoded}&x=1"
        assert [text[start:end] for start, end, _ in memory.spans(text)] == [encoded], encoded
