"""Redactor.redact_messages prefilters a batch (issue 12: the first transcript of a 100,000-message history).

The prefilter may only skip work: on any batch, bulk redaction must return exactly what redacting the messages one
by one returns, and learn exactly the same secrets. The batches mix the secret and code corpora with JSON arguments,
meta and parts of every shape, secrets in mapping keys, escaped JSON, non-ASCII keys, and secrets learned in the
middle of a batch that repeat, bare, further on.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.messages import Message, TextPart, ThinkingPart, ToolCall, UnknownPart
from contextfold.redact import Redactor
from contextfold.redact.rules import BUILTIN_PATTERNS, SECRET_KEY

_TEXTS = [item.text for item in (*SECRETS, *CODE)]
_GITHUB = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
_texts = st.sampled_from(_TEXTS) | st.text(max_size=40) | st.sampled_from(
    [f"token {_GITHUB}", _GITHUB[4:], f"the run {_GITHUB[4:]} again", "ſecret", "password", "plain words"])
_keys = st.sampled_from(["id", "note", "password", "db_pass", "GITHUB_TOKEN", "ſecret", "Kpi_key", "api_key"])
_maps = st.dictionaries(_keys, _texts | st.integers(), max_size=3)


def _arguments(value: dict[str, object], escaped: bool) -> str:
    return json.dumps(value, ensure_ascii=escaped)


_calls = st.builds(lambda name, args, escaped: ToolCall("c1", name, _arguments(args, escaped)),
                   st.sampled_from(["bash", "search"]), _maps, st.booleans())
_content = _texts | st.lists(
    st.one_of(st.builds(TextPart, _texts, extra=_maps), st.builds(ThinkingPart, text=_texts),
              st.builds(UnknownPart, data=_maps)), max_size=3).map(tuple)
_messages = st.builds(
    lambda role, content, calls, meta, extra: Message(role, content, tuple(calls) if role == "assistant" else (),
                                                      meta=meta, extra=extra),
    st.sampled_from(["user", "assistant", "system"]), _content, st.lists(_calls, max_size=2), _maps, _maps)


@settings(max_examples=150, deadline=None)
@given(st.lists(_messages, max_size=12))
def test_bulk_redaction_is_learning_the_batch_then_redacting_one_by_one(batch: list[Message]) -> None:
    one, bulk = Redactor(), Redactor()
    one.learn_from(batch)
    expected = [one.redact_message(m) for m in batch]
    assert bulk.redact_messages(batch) == expected
    assert bulk._learned == one._learned
    # Learning the batch takes in everything one by one redaction would learn (and, first, what it learns later).
    by_one = Redactor()
    for m in batch:
        by_one.redact_message(m)
    assert set(by_one._learned) <= set(bulk._learned)


def test_a_secret_learned_mid_batch_is_replaced_in_later_messages_the_prefilter_cleared() -> None:
    # The last message holds no trigger: only the secret learned two messages before makes it a suspect.
    batch = [Message.user("nothing here"), Message.user(f"export GITHUB_TOKEN={_GITHUB}"),
             Message.user(f"the run {_GITHUB[4:]} again")]
    redacted = Redactor().redact_messages(batch)
    assert redacted[0] is batch[0]
    assert _GITHUB[4:] not in redacted[2].text
    one_by_one = Redactor()
    assert redacted == [one_by_one.redact_message(m) for m in batch]


def test_a_remembered_secret_makes_a_message_without_triggers_a_suspect() -> None:
    redactor = Redactor()
    redactor.redact_text(f"export GITHUB_TOKEN={_GITHUB}")
    clean, repeat = Message.user("nothing to see"), Message.user(f"bare {_GITHUB[4:]}")
    out = redactor.redact_messages([clean, repeat])
    assert out[0] is clean
    assert out[1].text == "bare [REDACTED:github_token]"


def test_a_user_pattern_without_triggers_turns_the_prefilter_off() -> None:
    redactor = Redactor(patterns={"ticket": r"TCK-\d{6}"})
    assert redactor.redact_messages([Message.user("see TCK-123456")])[0].text == "see [REDACTED:ticket]"
    assert redactor._message_redactor._suspects([Message.user("x")]) is None


def test_every_builtin_pattern_names_what_it_needs() -> None:
    # The prefilter clears a text only by what the patterns say they need: a trigger, or a `needs` pattern.
    assert all(p.triggers or p.needs is not None for p in BUILTIN_PATTERNS)
    assert [p.name for p in BUILTIN_PATTERNS if not p.triggers] == [
        "airtable_token", "password", "basic_auth", "api_key", "encoded_secret"]
    assert Redactor()._message_redactor._suspects([Message.user("x")]) == (set(), ["x"])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ09+/=_-. \nKſİ"), max_size=60) | st.sampled_from(_TEXTS))
def test_what_encoded_secret_needs_is_found_wherever_it_matches(text: str) -> None:
    encoded = next(p for p in BUILTIN_PATTERNS if p.name == "encoded_secret")
    assert encoded.needs is not None
    if encoded.regex.search(text):
        assert encoded.needs.search(text.lower())


def test_every_secret_key_the_key_rule_knows_holds_a_trigger() -> None:
    # The key rule ({"password": "..."}) is applied to mapping keys without triggers; the prefilter clears a
    # message only when no trigger is in it, so every key the rule accepts must hold one once lower-cased.
    triggers = {t for p in BUILTIN_PATTERNS for t in p.triggers}
    keys = ["password", "passwd", "passphrase", "api_key", "apikey", "api-key", "secret_key", "secret_access_key",
            "client_secret", "access_token", "auth_token", "refresh_token", "id_token", "private_key", "access_key",
            "account_key", "shared_access_key", "signing_key", "encryption_key", "master_key", "pass", "pwd",
            "secret", "token", "db_pass", "GITHUB_TOKEN", "jwtSecret", "OPENAI_API_KEY"]
    for key in keys:
        assert SECRET_KEY.fullmatch(key), key
        assert any(t in key.lower() for t in triggers), key


def test_keys_the_prefilter_cannot_read_go_the_slow_way() -> None:
    # "paſſword" matches the key rule case-insensitively (ſ folds to s) but holds no trigger once lower-cased; a
    # key written with JSON escapes is not in the arguments' text at all. Both must still be redacted.
    hidden_key = Message.user("x", meta={"paſſword": "hunter2value"})
    escaped = json.dumps({"password": "swordfish9value"}).replace("password", "\\u0070assword")
    escaped_key = Message("assistant", "", (ToolCall("c1", "bash", escaped),))
    for message in (hidden_key, escaped_key):  # (apart: a secret learned from one would make the other a suspect)
        out = Redactor().redact_messages([message])
        assert out == [Redactor().redact_message(message)]
        assert "hunter2value" not in str(out[0]) and "swordfish9value" not in str(out[0])


@settings(max_examples=40, deadline=None)
@given(st.lists(_messages, max_size=12), st.lists(st.integers(0, 12), max_size=3))
def test_redacting_a_history_in_steps_gives_what_one_batch_gives(batch: list[Message], cuts: list[int]) -> None:
    # Issue 22: a redactor keeps each message it redacted and, asked again, looks in it only for the secrets learned
    # since. A history redacted as it grows (each transcript the whole view again) must come out as one batch does.
    stepped = Redactor()
    for cut in sorted(min(cut, len(batch)) for cut in cuts):
        stepped.redact_messages(batch[:cut])
        if cut:
            stepped.redact_message(batch[cut - 1])
    assert stepped.redact_messages(batch) == Redactor().redact_messages(batch)


def test_a_batch_redacted_again_is_not_scanned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    batch = [Message.user(f"step {i}: the token is in the config") for i in range(20)]
    batch.append(Message.user(f"export GITHUB_TOKEN={_GITHUB}"))
    first = redactor.redact_messages(batch)
    scanned: list[str] = []
    original = Redactor.redact_text
    monkeypatch.setattr(Redactor, "redact_text", lambda self, text: scanned.append(text) or original(self, text))
    assert redactor.redact_messages(batch) == first
    assert scanned == []


def test_a_secret_learned_later_is_looked_for_only_in_what_was_redacted_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    value = "Zq8vK3mN9pL2xR7t"
    redactor = Redactor()
    batch = [Message.user(f"step {i}: the key is in the config") for i in range(20)]
    batch.append(Message.user(f"I will use {value} from now on."))
    assert redactor.redact_messages(batch) == batch  # a bare value is nothing without its context
    redactor.redact_text(f"DB_PASSWORD={value}")
    scanned: list[str] = []
    original = Redactor.redact_text
    monkeypatch.setattr(Redactor, "redact_text", lambda self, text: scanned.append(text) or original(self, text))
    out = redactor.redact_messages(batch)
    assert out[:-1] == batch[:-1] and out[-1].text == "I will use [REDACTED:password] from now on."
    assert scanned == [batch[-1].text]  # the one message that mentions it, and no other


@settings(max_examples=150, deadline=None)
@given(st.lists(_messages, max_size=12))
def test_a_text_the_prefilter_cleared_is_remembered_with_the_findings_a_scan_gives(batch: list[Message]) -> None:
    # Issue 22: the read-ahead scanned again, for a digest's blanking, every output add() had cleared in bulk. The
    # cleared texts are now remembered as scanned (no finding); that must be what a scan of each finds.
    bulk, plain = Redactor(), Redactor()
    bulk._scanner.scans = type(bulk._scanner.scans)()  # (a cache of its own: what this batch alone records)
    bulk.redact_messages(batch)
    for m in batch:
        if isinstance(m.content, str) and bulk._scanner.scans.get(m.content) == ():
            assert plain._scanner.scan(m.content) == ()


def test_a_clean_output_add_cleared_in_bulk_is_not_scanned_again_by_a_digest() -> None:
    r = Redactor()
    r._scanner.scans = type(r._scanner.scans)()
    text = "\n".join(f"src/app/module_{n}.py:{n}: def load_{n}(x): return x + {n}" for n in range(40))
    r.redact_messages([Message.tool("c1", text, name="bash"), Message.user("Fix the loader.")])  # (a turn: in bulk)
    assert r._scanner.scans.get(text) == ()
    assert r.blank(text) == text
