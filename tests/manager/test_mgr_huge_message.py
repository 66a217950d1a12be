"""A user message over the large-input limit and the window is cut as it arrives (issue 22: bounded work).

Before, a 10 MB paste stayed whole in the view until the next ``prepare()`` compacted it: that call read all of it
(entities, sentences, the data-line share, the secret scan) for 6.5 s, and what the view kept of it was a summary.
"""

from __future__ import annotations

from contextfold.manager import ContextManager
from contextfold.telemetry import CacheTruncated, RecordingTelemetry

LINES = [f"2025-01-01T00:00:{i % 60:02d} GET /api/v1/items/{i} 200 took {i % 97}ms user_id={i % 13}"
         for i in range(6_000)]
PASTE = "Why do these requests slow down?\n" + "\n".join(LINES)


def test_a_paste_over_the_input_limit_and_the_window_is_cut_to_head_tail_and_ref_when_added() -> None:
    assert len(PASTE.encode()) > 256 * 1024  # over policy.large_input_bytes, and ~100K tokens: over the window
    telemetry = RecordingTelemetry()
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", telemetry=telemetry)
    cm.add([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
            {"role": "user", "content": PASTE}])
    stored = cm.messages()[-1]
    ref = str(stored.meta["ref"])
    assert stored.meta["kind"] == "truncated"
    assert stored.text.startswith("Why do these requests slow down?\n" + LINES[0])
    assert LINES[-1] in stored.text and f"[your message cached as ref={ref}:" in stored.text
    assert cm.cache is not None and cm.cache.get(ref) == PASTE  # every byte readable by ref
    assert any(isinstance(e, CacheTruncated) and e.ref == ref for e in telemetry.events)
    request = cm.prepare()
    assert request[-1] == {"role": "user", "content": stored.text}  # the cut view is sent, not a summary of it
    assert cm.archive is not None
    restored = cm.archive.restore_history(cm.session_id, cm.messages(), resolve_ref=cm.cache.get)
    assert restored[-1].text == PASTE
    cm.close()


def test_a_paste_within_the_input_limit_stays_whole() -> None:
    paste = "\n".join(LINES[:2_000])  # ~150 KB: over the 16K window, but under the 256 KB input limit
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory")
    cm.add([{"role": "user", "content": paste}])
    assert cm.messages()[-1].text == paste and "ref" not in cm.messages()[-1].meta
    cm.close()
