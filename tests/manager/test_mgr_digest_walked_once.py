"""The read-ahead walks each placeholder's digest once (issue 22): the items it asks the secrets about are scanned in
bulk as it asks (``_read_ahead.ScanningInBulk``), not collected by a walk of their own first. The placeholders are
those a cold masking builds, and the masking turn scans no item one by one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from contextfold.cache import ToolOutputCache, _digest, masking
from contextfold.cache.masking import placeholder_ahead
from contextfold.manager import _read_ahead
from contextfold.manager._compactor import warm_for_compaction
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import TiktokenCounter


def _outputs(nonce: str) -> list[Message]:
    out: list[Message] = []
    for i in range(5):
        body = "\n".join(f"/srv/{nonce}/pkg_{i}/module_{n}.py:{n * 13}: KeyError in load_{nonce}_{n}() took {n} ms"
                         for n in range(25))
        if i == 2:
            body += f"\nexport API_TOKEN=tok_{nonce}Zq8vK3mN9pL2xR7t\n"
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls pkg_{i}"})),)))
        out.append(Message("tool", body, tool_call_id=f"c{i}", name="bash"))
    return out


def test_the_read_ahead_walks_each_digest_once_and_builds_the_cold_placeholder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")  # (answers and counts are remembered by text)
    history = _outputs(nonce)
    redactor, counter, cache = Redactor(), TiktokenCounter(), ToolOutputCache(MemoryBlobStore())
    walks: list[int] = []
    walk = _digest.output_digest

    def counted(*args: Any, **kwargs: Any) -> str:
        walks.append(1)
        return walk(*args, **kwargs)

    monkeypatch.setattr(_digest, "output_digest", counted)
    monkeypatch.setattr(masking, "output_digest", counted)
    warm_for_compaction(history, False, redactor, False, cache, 40, counter)
    outputs = history[1::2]
    assert len(walks) == len(outputs)

    cold_redactor = Redactor()
    cold_redactor.redact_messages(history)  # (what the session knows by then)
    cold_cache = ToolOutputCache(MemoryBlobStore())
    for m in outputs:
        known = next(c.arguments for a in history for c in a.tool_calls if c.id == m.tool_call_id)
        ahead = placeholder_ahead(m, cache, digest_tokens=40, known=known, counter=counter, secrets=redactor)
        cold = placeholder_ahead(m, cold_cache, digest_tokens=40, known=known, counter=counter,
                                 secrets=cold_redactor)
        assert ahead == cold
        assert f"tok_{nonce}" not in (ahead or "")


def test_bulk_scanning_answers_as_the_redactor_does() -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    words = [f"plain_{nonce}_{n}" for n in range(40)] + [f"ghp_{nonce}Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"]
    redactor = Redactor()
    guard = _read_ahead.ScanningInBulk(redactor, words, known=f"plain_{nonce}_3")
    answers = [guard.mentions_secret(w) for w in words if w != f"plain_{nonce}_3"]
    assert answers == [Redactor().mentions_secret(w) for w in words if w != f"plain_{nonce}_3"]
    assert answers[-1] and not any(answers[:-1])
    assert guard.digest_state() == redactor.digest_state()
