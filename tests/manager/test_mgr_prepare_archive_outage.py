"""An archive outage does not block the model call: prepare() reports a failed archive of dropped messages.

Since 408ab76 (fix F4) what normalization dropped stays in ``view.dropped`` until its archive succeeds, and
``prepare()`` archives it every turn: during an outage every ``prepare()`` raised until the archive came back (the
agent could not call its model). Now the failure is a ``compact.warning`` (``code="archive_failed"``), the request
goes out, and the messages are archived, once, by the first turn after the archive is back.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold import ContextManager
from contextfold.errors import StoreError

NONCE = "f7outage3k"
_ARCHIVE_WRITES = ("write", "write_chunks", "append")


class _Events:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def emit(self, event: Any) -> None:
        self.seen.append(event)

    def archive_failures(self) -> int:
        return sum(getattr(e, "code", "") == "archive_failed" for e in self.seen)


def _archive_down(cm: ContextManager, down: bool) -> None:
    assert cm.archive is not None
    store = cm.archive.store

    def fail(*_: Any, **__: Any) -> None:
        raise StoreError(f"archive down {NONCE}")

    for name in _ARCHIVE_WRITES:
        if down:
            setattr(store, name, fail)
        elif name in vars(store):
            delattr(store, name)


def _archived_texts(cm: ContextManager) -> list[str]:
    assert cm.archive is not None
    return [m.text for _, messages in cm.archive.transcripts(NONCE) for m in messages]


def test_prepare_goes_on_through_an_archive_outage_and_archives_what_is_owed_after() -> None:
    events = _Events()
    cm = ContextManager(model="gpt-4o", max_context_tokens=3000, store="memory", archive="memory",
                        session_id=NONCE, archive_events=False, telemetry=events)
    call = {"id": "d1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}}
    cm.add([{"role": "user", "content": f"task {NONCE}"}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "d1", "content": f"first answer {NONCE}"},
            {"role": "tool", "tool_call_id": "d1", "content": f"duplicate answer {NONCE}"},
            {"role": "assistant", "content": f"done {NONCE}"}, {"role": "user", "content": f"next {NONCE}"}])
    _archive_down(cm, True)
    for turn in range(3):
        request = cm.prepare("openai_chat")  # (raised StoreError on 33be69a)
        assert request[-1]["content"] == (f"next {NONCE}" if turn == 0 else f"user {turn} {NONCE}")
        assert events.archive_failures() == turn + 1
        assert [m.text for m in cm._view.dropped] == [f"duplicate answer {NONCE}"]  # (still owed)
        cm.add([{"role": "assistant", "content": f"assistant {turn + 1} {NONCE}"},
                {"role": "user", "content": f"user {turn + 1} {NONCE}"}])
    with pytest.raises(StoreError):  # an explicit archive call says it did not archive
        cm.archive_view()
    assert len(cm._view.dropped) == 1
    _archive_down(cm, False)
    cm.prepare("openai_chat")
    assert cm._view.dropped == []
    assert events.archive_failures() == 3
    cm.archive_view()
    assert sum(f"duplicate answer {NONCE}" in t for t in _archived_texts(cm)) == 1
    cm.close()
