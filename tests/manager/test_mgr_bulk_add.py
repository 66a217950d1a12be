"""A bulk ``add()`` (a resumed or imported history) leaves its secrets to the compaction's catch-up (issue 22).

Redacting a bulk's two ends in ``add()`` cost ~0.6 s of the 100,000 recorded messages, and the catch-up learning
them with the rest of the view ~0.3 s. The secrets are still learned before anything is written: a secret at either
end of the bulk is out of every transcript, and out of the summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.manager._intake import _READ_AHEAD_MAX
from contextfold.messages import Message
from contextfold.redact import Redactor

NONCE = "bk4e9w"
PASSWORD = f"Zx8!{NONCE}Lq3T"
BULK_TURNS = 1_500  # 3,002 messages: over the 1,000 a compaction reads of one slice (the bulk's two ends)


def _bulk() -> list[Message]:
    # (The middle repeats two messages: read once, so the test stays cheap.)
    turn = [Message.assistant(f"checked the next file of {NONCE}"), Message.user(f"go on with {NONCE}")]
    return [Message.user(f"my database password: {PASSWORD}"), *turn * BULK_TURNS,
            Message.assistant(f"connected with the password: {PASSWORD}")]


def test_a_bulk_adds_secrets_stay_out_of_the_summary_and_the_archive(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    with ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive=str(archive),
                        session_id=f"bulk-{NONCE}") as cm:
        cm.add(_bulk())  # (far past the soft threshold: add() reads what it adds)
        cm.prepare()
        assert cm.compactions == 1
        summary = next(m for m in cm.messages() if m.kind == "summary").text
    assert NONCE in summary and PASSWORD not in summary
    written = [p.read_text(encoding="utf-8", errors="replace") for p in archive.rglob("*") if p.is_file()]
    assert any(NONCE in text for text in written)  # (the transcript is there: the check below can fail)
    assert not [text for text in written if PASSWORD in text]


def test_a_short_add_past_half_the_soft_threshold_still_redacts_what_it_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    ahead: list[int] = []
    redact_ahead = Redactor.redact_ahead

    def spied(self: Redactor, messages: Any, *, paced: bool = True) -> int:
        done = redact_ahead(self, messages, paced=paced)
        ahead.append(done)
        return done

    monkeypatch.setattr(Redactor, "redact_ahead", spied)
    with ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                        session_id=f"short-{NONCE}") as cm:
        cm.add(_bulk()[:_READ_AHEAD_MAX])  # (a batch no longer than what add() reads: read whole)
        assert ahead == [_READ_AHEAD_MAX]


@pytest.mark.parametrize(("window", "queued"), [(16_000, 0), (128_000, _READ_AHEAD_MAX)])
def test_a_bulk_add_past_the_hard_threshold_queues_nothing_for_the_read_ahead(window: int, queued: int) -> None:
    # Past hard on its own, the next prepare() compacts the bulk: a read-ahead of its ends beside that compaction
    # would learn again what the compaction's catch-up learns. Under hard, its ends are read ahead as before.
    with ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive="memory",
                        session_id=f"queue-{NONCE}") as cm:
        cm.add(_bulk())
        assert (cm.tokens() >= cm.budgets.hard) == (queued == 0)
        assert len(cm._intake.unwarmed) == queued
