"""A turn's batch looks up the texts scanned before instead of searching them again (issue 22, the read-ahead).

The first read-ahead of a session redacts the messages added before half the soft threshold: a system prompt of a
few thousand characters, the same in every session of an agent, was searched by the bulk prefilter in each one.
A text content whose scan the patterns' scan cache holds is taken from there (its findings make the message a
suspect, or not); only the message's other strings are searched, and a batch remembers the long texts it cleared.
What the batch returns and learns must be what learning it and then redacting one by one does, whatever was scanned
before and by whom.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact._scanner import Scanner

_NONCE = "kq7v3t"
_TEXTS = [item.text for item in (*SECRETS, *CODE)]
# (a prompt with trigger words and a long path, nothing a rule redacts: the prefilter must look at it closely)
_PROMPT = (f"You are an agent {_NONCE}. Never print a token, key or password you read; pass the secret word on.\n"
           + "Use /testbed/src/package/module_with_a_long_name_0123456789.py to run the tests.\n" * 6)


def test_a_prompt_scanned_in_an_earlier_session_is_not_searched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = Redactor(), Redactor()  # (two sessions' redactors: the same patterns)
    assert first.redact_messages([Message.system(_PROMPT), Message.user(f"fix {_NONCE}")], kept=False)[0].text \
        == _PROMPT
    searched: list[str] = []
    real = Scanner.suspect_texts

    def recording(self: Scanner, texts: list[str], suspects: set[int], **kwargs: object) -> None:
        searched.extend(texts)
        real(self, texts, suspects, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Scanner, "suspect_texts", recording)
    prompt = Message.system(_PROMPT).with_meta(id=f"{_NONCE}-1")
    out = second.redact_messages([prompt, Message.user(f"again {_NONCE}")], kept=False)
    assert out[0] is prompt
    assert searched and not any(_PROMPT in text for text in searched)
    assert f"{_NONCE}-1" in "".join(searched)  # (its other strings are searched)


def test_a_prompt_found_holding_a_secret_before_is_redacted_and_learned() -> None:
    secret = "ghp_" + "Zx9Cv8Bn7Mq6Wl5Ek4Rj3Th2Yg1Uf0Id9Os8P"
    prompt = _PROMPT + f"export GITHUB_TOKEN={secret}\n"
    Redactor().scan(prompt)  # (an earlier session scanned it)
    later = Redactor()
    out = later.redact_messages([Message.system(prompt), Message.user(f"the value {secret[4:]} {_NONCE}")],
                                kept=False)
    assert secret not in out[0].text and secret[4:] not in out[1].text
    assert secret in later._learned


_long = st.lists(st.sampled_from(_TEXTS), min_size=1, max_size=4).map(
    lambda parts: "\n".join(parts) + "\n" + "plain filler words " * 14)  # (256 characters or more)
_contents = _long | st.sampled_from(_TEXTS)
_meta = st.sampled_from([{}, {"id": "m1"}, {"password": "hunter2-" + _NONCE}, {"note": SECRETS[0].text}])
_calls = st.sampled_from([(), (ToolCall("c1", "bash", '{"command": "ls"}'),),
                          (ToolCall("c2", "bash", '{"api_key": "abcd1234efgh5678"}'),)])
_messages = st.builds(
    lambda role, content, meta, calls: Message(role, content, calls if role == "assistant" else (), meta=meta,
                                               tool_call_id="c1" if role == "tool" else None),
    st.sampled_from(["system", "user", "assistant", "tool"]), _contents, _meta, _calls)


@settings(max_examples=60, deadline=None)
@given(st.lists(_messages, max_size=8), st.lists(st.integers(0, 7), max_size=8), st.booleans())
def test_a_batch_with_texts_scanned_before_redacts_as_one_by_one(batch: list[Message], scanned: list[int],
                                                                 in_bulk: bool) -> None:
    # Some of the texts were scanned before: by another session's batch (remembering those it cleared) or its scan.
    earlier = [m for i, m in enumerate(batch) if i in scanned]
    if in_bulk:
        Redactor().redact_messages(earlier, kept=False)
    else:
        for m in earlier:
            Redactor().scan(m.text)
    one, bulk = Redactor(), Redactor()
    one.learn_from(batch)
    expected = [one.redact_message(m) for m in batch]
    assert bulk.redact_messages(batch, kept=False) == expected
    assert bulk._learned == one._learned
