"""The batch prefilter holds a chunk of the batch's texts at a time, not all of them three times over (issue 22).

``Redactor._suspects`` joined each message's strings (with what escaped tool-call arguments decode to), lowered every
text and joined them all for one search, and the remembered strings were searched in all the texts joined again:
~3 copies of every text of a 100,000-message history at once (1.4 GB peak for 100,000 distinct messages, against
1.1 GB before the decoded arguments were read too). The texts are now lowered and searched
``_PREFILTER_CHUNK_CHARS`` at a time, and the strings decoded from arguments are made again when needed instead of
held for the whole batch. Same answers: the chunks' suspects and remembered hits are those of the whole batch.
"""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor, _messages

NONCE = "pf9Chunk"  # (unique to this file: no cache of another test answers for it)
LINE = "alpha beta gamma delta\n"  # (no trigger, no run any pattern needs)


def _edit(i: int, lines: int) -> Message:
    args = json.dumps({"path": f"src/f{i}.py", "new_str": f"{NONCE} {i}\n" + LINE * lines})
    return Message("assistant", "", (ToolCall(f"c{i}", "str_replace_editor", args),), meta={"id": f"{NONCE}:{i}"})


def test_learning_a_batch_of_escaped_arguments_does_not_hold_all_their_texts_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_messages, "_PREFILTER_CHUNK_CHARS", 100_000, raising=False)
    batch = [_edit(i, 2_000) for i in range(20)]  # (~46,000 characters of arguments each, as much decoded)
    arguments = sum(len(m.tool_calls[0].arguments) for m in batch)
    r = Redactor()
    r.learn(f"remembered-{NONCE}-value", "password")  # (so the batch is searched for what is remembered too)
    r.learn_from([_edit(-1, 1)])  # (the patterns compiled, what redaction imports loaded: not the batch's memory)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        r.learn_from(batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert all(r.redact_message(m) is m for m in batch)  # (cleared by the prefilter, recorded as themselves)
    # Texts, lowered texts and their join of the whole batch were ~3x the arguments with what they decode to (~6x).
    assert peak - before < arguments


_PIECES = [
    "plain words here", "api_key=sk-live-4f9a8b7c6d5e4f3a2b1c", "password: hunter2-" + NONCE, "line\nbreak \"quoted\"",
    "caf\u00e9", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", "",
]


@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(0, len(_PIECES) - 1), st.booleans()), min_size=1, max_size=12),
       chunk=st.integers(1, 300))
def test_chunks_find_what_the_whole_batch_finds(picks: list[tuple[int, bool]], chunk: int) -> None:
    batch = []
    for i, (piece, as_call) in enumerate(picks):
        text = f"{_PIECES[piece]} {NONCE} {i}"
        if as_call:
            batch.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": text})),),
                                 meta={"id": f"{NONCE}:c{i}"}))
        else:
            batch.append(Message("tool", text, tool_call_id=f"c{i}", name="bash", meta={"id": f"{NONCE}:t{i}"}))
    whole, chunked = Redactor(), Redactor()
    for r in (whole, chunked):
        r.learn(f"hunter2-{NONCE}", "password")
    expected = whole._message_redactor._suspects(batch)
    expected_out = whole.redact_messages(batch)
    original = getattr(_messages, "_PREFILTER_CHUNK_CHARS", None)
    _messages._PREFILTER_CHUNK_CHARS = chunk  # type: ignore[attr-defined]
    try:
        found = chunked._message_redactor._suspects(batch)
        out = chunked.redact_messages(batch)
    finally:
        _messages._PREFILTER_CHUNK_CHARS = original  # type: ignore[attr-defined]
    assert expected is not None and found is not None
    assert found[0] == expected[0]
    assert out == expected_out
