"""A tool call's or a part's mappings are the message's own: a dict the caller keeps cannot change a message.

Found by the seventeenth red team (pre-existing; the same hole as ``test_redteam7_proxy_meta.py``, one level down):
``Message`` copies the ``meta`` and ``extra`` it is handed, but ``ToolCall.extra``, a part's ``extra`` and
``cache_control`` and ``UnknownPart.data`` kept the caller's dict. Redaction's results are kept by message (the
ledger), so a message found clean stayed "clean" after the caller wrote ``password=...`` into the dict it still
held: the credential went out in the next request and into the archive in clear. The formats' decoders copy what
they read; a message built in code (``ToolCall(..., extra=box)``) did not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart
from contextfold.redact import Redactor

NONCE = "rt17-parts-5c1e"
SECRET = "hunter2-Qv8Lm3Zr"


def _messages(where: str, box: dict[str, Any]) -> list[Message]:
    if where == "call":
        return [Message.user(f"What failed? {NONCE}"),
                Message.assistant("", [ToolCall("c1", "bash", "{}", extra=box)]), Message.tool("c1", "ok")]
    if where == "text":
        return [Message("user", (TextPart(f"What failed? {NONCE}", extra=box),)), Message.assistant("The build.")]
    return [Message("user", (TextPart(f"What failed? {NONCE}"), UnknownPart(box, format="openai_chat"))),
            Message.assistant("The build.")]


@pytest.mark.parametrize("where", ["call", "text", "unknown"])
def test_a_clean_message_stays_clean_when_the_caller_changes_a_dict_it_handed_a_part(where: str) -> None:
    box: dict[str, Any] = {"type": "note", "trail": ["read"]}
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=f"{NONCE}-{where}",
                        redact=Redactor(apply_to_model=True))
    cm.add(_messages(where, box))
    cm.prepare()
    box["trail"].append(f"password={SECRET}")
    box["more"] = f"password={SECRET}"
    cm.add([Message.user("next")])
    sent = cm.prepare()
    cm.compact(force=True)
    cm.close()
    assert SECRET not in json.dumps(sent, default=str)
    assert cm.archive is not None
    archived = [m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    assert NONCE in repr(archived)
    assert SECRET not in repr(archived)


def test_parts_and_calls_own_every_mapping_they_are_handed() -> None:
    def box() -> dict[str, Any]:
        return {"type": "x", "trail": ["read"], "deep": {"k": "v"}}

    made = [ToolCall("c1", "f", "{}", extra=box()), TextPart("t", cache_control=box(), extra=box()),
            ImagePart(url="u", cache_control=box(), extra=box()),
            DocumentPart(url="u", cache_control=box(), extra=box()),
            ThinkingPart("t", cache_control=box(), extra=box()), UnknownPart(box(), cache_control=box(), extra=box())]
    for thing in made:
        for name in ("extra", "cache_control", "data"):
            mapping = getattr(thing, name, None)
            if mapping is None:
                continue
            with pytest.raises(TypeError):
                mapping["trail"] = []  # type: ignore[index]
    held = box()
    call = ToolCall("c1", "f", "{}", extra=held)
    held["trail"].append("changed")
    held["deep"]["k"] = "changed"
    held["type"] = "changed"
    assert dict(call.extra) == box()
