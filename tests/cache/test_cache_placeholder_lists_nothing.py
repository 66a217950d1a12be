"""A light placeholder stands at every secrets' state only when it lists nothing (issue 22, review of lane Q).

Latent with today's light digest, which lists nothing for an output over ``LIGHT_MAX_CHARS``: ``partial`` also meant
"listed from its first and last lines" (the full digest, the sixteenth session's windowed light one), so a light
digest listing anything for a long output again must still be checked against what the session learns.
"""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache import masking as masking_module
from contextfold.cache._light_digest import LIGHT_MAX_CHARS, LightDigest
from contextfold.cache.masking import placeholder_ahead
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter

COUNTER = MessageCounter(TiktokenCounter("o200k_base"))


def test_a_long_output_digest_that_lists_is_checked_after_a_learned_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    n = datetime.now(UTC).strftime("%H%M%S%f")
    value = f"deploy_key_{n}_Xq9"
    text = f"/srv/{value}/main.py failed\n" + "".join(f"/srv/{n}/f_{i}.py ok\n" for i in range(300))
    assert len(text) > LIGHT_MAX_CHARS
    real = masking_module.light_digest

    def windowed(t: str, **kw):  # the sixteenth session's light digest: head and tail windows of a long output
        d = real(t[:1000], **kw)
        return LightDigest(d.text, True, d.asked) if len(t) > LIGHT_MAX_CHARS else real(t, **kw)

    monkeypatch.setattr(masking_module, "light_digest", windowed)
    history = [Message("user", "go"), Message("assistant", "", (ToolCall("c0", "bash", json.dumps({"c": 1})),)),
               Message("tool", text, tool_call_id="c0", name="bash"), Message("assistant", "done")]
    redactor = Redactor()
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    placeholder_ahead(history[2], cache, digest_tokens=40, known=json.dumps({"c": 1}), counter=COUNTER.counter,
                      secrets=redactor, digest_kind="light")
    built = next(iter(cache.placeholders._entries.values()))
    assert value in built.placeholder, built  # listed while not a secret (set-up)
    redactor.learn(value, "password")
    result = mask_tool_outputs(history, budget_tokens=0, counter=COUNTER, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=40, digest_kind="light", secrets=redactor)
    assert value not in result.messages[2].text, result.messages[2].text
