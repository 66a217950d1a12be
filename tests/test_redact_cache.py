"""Redaction remembers scans by text and clean messages (issue 15): the output must be what it was without that.

A warmed redactor (its shadow scanned every message on the side) and a cold one redact the same messages to the
same result and learn the same secrets; warming itself learns nothing; a message found clean is walked again once
a secret has been learned (a remembered secret can appear in text no pattern recognises).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor


def _messages() -> list[Message]:
    out: list[Message] = []
    for i, item in enumerate([*CODE, *SECRETS]):
        out.append(Message.user(f"step {i}: {item.label}"))
        args = json.dumps({"cmd": f"cat file_{i}", "note": item.text[:80]})
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", args),)))
        out.append(Message("tool", item.text, tool_call_id=f"c{i}", name="bash", meta={"id": f"m{i}"}))
    return out


def test_a_warmed_redactor_redacts_and_learns_exactly_as_a_cold_one() -> None:
    messages = _messages()
    cold, warmed = Redactor(), Redactor()
    assert warmed.warm(messages) == len(messages)
    assert warmed._learned == {}  # warming learns nothing: secrets are learned when really redacted
    assert [warmed.redact_message(m) for m in messages] == [cold.redact_message(m) for m in messages]
    assert warmed._learned == cold._learned
    # And a second pass (scans and clean messages remembered) gives the same again.
    assert [warmed.redact_message(m) for m in messages] == [cold.redact_message(m) for m in messages]


def test_warming_does_not_make_an_unlearned_repeat_redacted() -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    warmed = Redactor()
    warmed.warm([Message.user(f"token {secret}")])
    run = secret[4:]
    # Without warming, a bare repeat seen before the secret itself was found is not caught; warming changes nothing.
    assert warmed.redact_text(f"repeat {run}") == Redactor().redact_text(f"repeat {run}") == f"repeat {run}"


def test_a_message_found_clean_is_redacted_again_once_a_secret_is_learned() -> None:
    secret = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    run = secret[4:]
    later = Message("tool", f"the value was {run}", tool_call_id="c1", name="bash")
    redactor = Redactor()
    assert redactor.redact_message(later) is later  # clean: nothing found, nothing learned yet
    redactor.redact_text(f"export GITHUB_TOKEN={secret}")  # learns the secret's runs
    assert run not in redactor.redact_message(later).text


def test_scans_are_shared_with_the_shadow_and_bounded() -> None:
    redactor = Redactor()
    redactor.warm([Message.user("nothing secret here")])
    assert redactor._scanner.scans.get("nothing secret here") == ()


# The words a digest may list: secrets' values and their text (the patterns' own context), code and its words.
_WORDS = sorted({w for s in SECRETS for w in (*s.values, s.text[:60], *s.text.split()[:6])}
                | {w for c in CODE for w in c.text.split()[:8]})


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_WORDS), st.text(max_size=30)), max_size=24))
def test_words_scanned_in_bulk_are_found_as_when_scanned_one_by_one(words: list[str]) -> None:
    # Issue 22: the read-ahead scans a digest's items in bulk (the prefilter clears most at once); the masking turn
    # then reads the scans remembered: they must be what scanning each word alone finds.
    redactor = Redactor()
    redactor.scan_words(words)
    assert not redactor.memory.values()  # (scanning learns nothing)
    for word in words:
        assert redactor.scan(word) == list(redactor._scanner.scan(word))


_SHARED_PREFILTER = Redactor()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_WORDS), st.sampled_from(["pass", "Key", "İ", "\x00", "ſecret", "ghp_"]),
                          st.text(max_size=30)), min_size=1, max_size=24))
def test_words_read_joined_are_suspected_as_when_read_one_by_one(words: list[str]) -> None:
    # Issue 22: scan_words reads a digest's items joined (one automaton call for all): every word holding a
    # trigger or a need must still be suspected, and no other.
    redactor = _SHARED_PREFILTER
    redactor.patterns
    fresh = list(dict.fromkeys(w for w in words if w))
    one_by_one: set[int] = set()
    joined: set[int] = set()
    redactor._scanner.suspect_texts(fresh, one_by_one)
    redactor._scanner.suspect_texts(fresh, joined, joined=True)
    assert joined == one_by_one
