"""An output too long for a light digest is handed to the session's learning, not blanked (issue 22, eighteenth
session).

A light digest lists nothing of an output over LIGHT_MAX_CHARS; it handed the output to ``blank`` only for what
blanking learns (review 3 of the seventeenth session: a secret only that output holds must be known before a later
digest). Blanking also searched the whole text for every remembered string and copied it, for a result no one read:
``learn_text`` learns the same secrets. The placeholder and what the session learns are as before.
"""

from __future__ import annotations

import uuid

import pytest

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache._light_digest import LIGHT_MAX_CHARS, light_digest
from contextfold.cache.masking import placeholder_ahead
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter

COUNTER = MessageCounter(TiktokenCounter("o200k_base"))


def _history(nonce: str, secret: str) -> list[Message]:
    long_output = f"export DB_PASSWORD={secret}\n" + f"row ok {nonce}\n" * 400
    assert len(long_output) > LIGHT_MAX_CHARS
    return [Message("user", "go"),
            Message("assistant", "", (ToolCall("c1", "bash", '{"cmd": "env"}'),)),
            Message("tool", long_output, tool_call_id="c1", name="bash"),
            Message("assistant", "done")]


def test_a_long_output_built_ahead_is_learned_from_not_blanked(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = f"{uuid.uuid4().int % 10**12:012d}"  # (digits: with hex letters the value is caught alone as random)
    secret = f"Qz7v{nonce}Lp2Rw9Xk"
    history = _history(nonce, secret)
    redactor = Redactor()
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    blanked: list[str] = []
    real_blank = Redactor.blank
    monkeypatch.setattr(Redactor, "blank", lambda self, text: blanked.append(text) or real_blank(self, text))
    placeholder = placeholder_ahead(history[2], cache, digest_tokens=40, known="", counter=COUNTER.counter,
                                    secrets=redactor, digest_kind="light")
    assert placeholder is not None and "mentioned" not in placeholder
    assert history[2].content not in blanked  # (learned, not blanked)
    assert redactor.mentions_secret(secret)  # (the long output taught it)
    monkeypatch.undo()
    masked = mask_tool_outputs(history, budget_tokens=0, counter=COUNTER, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=40, digest_kind="light", secrets=redactor)
    assert masked.masked_indices == (2,) and masked.messages[2].content == placeholder


def test_without_learn_a_long_output_is_still_blanked_for_its_secrets() -> None:
    nonce = f"{uuid.uuid4().int % 10**12:012d}"
    secret = f"Qz7v{nonce}Lp2Rw9Xk"
    redactor = Redactor()
    digest = light_digest(str(_history(nonce, secret)[2].content), budget_tokens=40, counter=COUNTER.counter,
                          mentions_secret=redactor.mentions_secret, blank=redactor.blank)
    assert digest.text == "" and digest.partial
    assert redactor.mentions_secret(secret)
