"""A secret only a long masked output holds is learned before a later light digest (review 3, seventeenth session).

The light digest reads no output over LIGHT_MAX_CHARS; blanking such an output was also what taught the session its
secrets, so a shorter output masked after it listed the same value bare (the full digest, which reads the stored
output whole, did not).
"""

from __future__ import annotations

import uuid

import pytest

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache._light_digest import LIGHT_MAX_CHARS
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter

COUNTER = MessageCounter(TiktokenCounter("o200k_base"))


@pytest.mark.parametrize("kind", ["light", "full"])
def test_a_secret_only_a_long_masked_output_assigns_is_not_listed_bare_later(kind: str) -> None:
    nonce = f"{uuid.uuid4().int % 10**12:012d}"  # (digits: with hex letters the value is caught alone as random)
    secret = f"Qz7v{nonce}Lp2Rw9Xk"
    long_output = f"export DB_PASSWORD={secret}\n" + f"row ok {nonce}\n" * 400
    assert len(long_output) > LIGHT_MAX_CHARS
    short_output = f"user_token {secret} accepted by auth_{nonce}\nconfig_{nonce}.yaml loaded\n" + "checked ok\n" * 60
    redactor = Redactor()
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    history = [Message("user", "go"),
               Message("assistant", "", (ToolCall("c1", "bash", '{"cmd": "env"}'),)),
               Message("tool", long_output, tool_call_id="c1", name="bash"),
               Message("assistant", "", (ToolCall("c2", "bash", '{"cmd": "login"}'),)),
               Message("tool", short_output, tool_call_id="c2", name="bash"),
               Message("assistant", "done")]
    result = mask_tool_outputs(history, budget_tokens=0, counter=COUNTER, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=40, digest_kind=kind, secrets=redactor)
    assert result.masked_indices == (2, 4)
    sent = [str(m.content) for m in result.messages]
    assert "mentioned:" in sent[4] and "user_token" in sent[4]
    assert not any(secret in text for text in sent)
