"""What the view keeps for masking and for old reasoning equals what reading the whole view again gives (issue 22).

A masking turn used to pair, count, normalize and encode the whole view again; the view now keeps its settled
prefix's pairs and per-message counts, and a rewrite of some messages (masking's placeholders, cleared inputs,
cleared reasoning) keeps the prefix and its encodings up to the first change. ``keep_thinking_turns`` reads where
the old reasoning is from what it kept of the prefix. Each must answer exactly what the from-scratch derivation
answers, after any sequence of appends, rewrites, replacements and reads.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.formats import get_format
from contextfold.manager._provider_items import _OldReasoning
from contextfold.manager._view import View
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCall
from contextfold.pairing import normalize, pair_list
from contextfold.provider_context import clear_old_reasoning
from contextfold.tokens import EstimatingCounter, MessageCounter

IDS = ("a", "b", "c")  # few ids: reuse across turns, duplicates and late results happen often
WIRES = ("openai_chat", "openai_responses", "anthropic")


@st.composite
def batches(draw: Any) -> list[Message]:
    batch: list[Message] = []
    for _ in range(draw(st.integers(1, 4))):
        role = draw(st.sampled_from(("user", "assistant", "calls", "calls", "tool", "tool", "system", "empty",
                                     "thinking")))
        if role == "calls":
            ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3))
            calls = tuple(ToolCall(i, draw(st.sampled_from(("bash", "edit"))), json.dumps({"cmd": i})) for i in ids)
            content: Any = draw(st.sampled_from(("", "running it")))
            if draw(st.booleans()):
                content = (ThinkingPart(f"why {ids[0]}", signature="s"), *((TextPart(content),) if content else ()))
            batch.append(Message("assistant", content, calls))
        elif role == "tool":
            batch.append(Message("tool", draw(st.sampled_from(("ok", "a long failing output"))),
                                 tool_call_id=draw(st.sampled_from(IDS)), name="bash"))
        elif role == "empty":
            batch.append(Message("assistant", ""))
        elif role == "thinking":
            parts = (ThinkingPart("thought it through", signature="t"),
                     *((TextPart("done"),) if draw(st.booleans()) else ()))
            batch.append(Message("assistant", parts))
        else:
            batch.append(Message(role, draw(st.sampled_from(("go on", "fix it", "done")))))
    return batch


@st.composite
def steps(draw: Any) -> tuple[str, Any]:
    """One operation: append a batch, read, replace the view by its normalized form, or rewrite some messages."""
    kind = draw(st.sampled_from(("append", "append", "append", "read", "replace", "rewrite", "rewrite")))
    if kind == "append":
        return kind, draw(batches())
    if kind == "rewrite":  # which messages (drawn as fractions of the view) and how
        return kind, draw(st.lists(st.tuples(st.floats(0, 0.999), st.sampled_from(("mask", "clear", "empty"))),
                                   min_size=1, max_size=3))
    return kind, None


def _changed(m: Message, how: str, n: int) -> Message:
    """What masking (a tool result), clearing inputs or reasoning (an assistant message) makes of ``m``."""
    if how == "empty" and m.role == "assistant":
        return m.with_content("")  # (dropped by normalization unless it has calls: the view must replace itself)
    if m.role == "tool":
        return m.with_content(f"[tool output trimmed; ref=tout_{n:016x}]").with_meta(kind="masked")
    if m.role == "assistant" and m.tool_calls:
        calls = tuple(ToolCall(c.id, c.name, json.dumps({"trimmed": True, "ref": n})) for c in m.tool_calls)
        return Message("assistant", m.content, calls)
    if m.role == "assistant" and not isinstance(m.content, str):
        return m.with_content(tuple(p for p in m.content if not isinstance(p, ThinkingPart)) or "cleared")
    return m.with_content(f"{m.text} (edited {n})")


def _changes(whole: list[Message], arg: list[tuple[float, str]], n: int) -> dict[int, Message]:
    out: dict[int, Message] = {}
    for at, how in arg:
        i = int(at * len(whole))
        out[i] = _changed(whole[i], how, n)
    return out


def _run(view: View, kind: str, arg: Any, n: int) -> None:
    if kind == "append":
        keep, _ = view.split_orphans(arg)
        view.append(keep)
    elif kind == "replace":
        view.replace(view.normalized())
    elif kind == "rewrite":
        whole = view.normalized()
        if whole:
            view.rewrite(_changes(whole, arg, n))


@settings(max_examples=100, deadline=None)
@given(st.lists(steps(), min_size=1, max_size=25))
def test_the_view_kept_for_masking_equals_the_view_read_again(ops: list[tuple[str, Any]]) -> None:
    counter = MessageCounter(EstimatingCounter())
    view = View(counter)
    for n, (kind, arg) in enumerate(ops):
        rewritten: list[Message] | None = None
        if kind == "rewrite" and (whole := view.normalized()):
            for i, m in _changes(whole, arg, n).items():
                whole[i] = m
            rewritten = normalize(whole)  # (a message a change left empty leaves the view)
        _run(view, kind, arg, n)
        messages = view.normalized()
        if rewritten is not None:
            assert messages == rewritten
        assert messages == normalize(messages)
        assert view.pairs() == pair_list(messages)
        counts = [counter.count_message(m) for m in messages]
        assert view.counts() == counts
        assert view.totals() == (sum(counts), sum(c for c, m in zip(counts, messages, strict=True)
                                                   if m.role == "tool"), len(messages))
        for name in WIRES:
            wire = get_format(name)
            assert view.encoded(wire) == wire.encode(messages), name


@settings(max_examples=100, deadline=None)
@given(st.lists(steps(), min_size=1, max_size=25), st.integers(0, 3))
def test_old_reasoning_kept_with_the_view_frees_what_clearing_the_whole_view_frees(ops: list[tuple[str, Any]],
                                                                                  keep: int) -> None:
    counter = MessageCounter(EstimatingCounter())
    view = View(counter)
    kept = _OldReasoning()
    for n, (kind, arg) in enumerate(ops):
        _run(view, kind, arg, n)
        messages = view.normalized()
        cleared = clear_old_reasoning(messages, keep)
        expected = (sum(counter.count_message(messages[i]) - counter.count_message(cleared.messages[i])
                        for i in cleared.indices) if cleared.parts else None)
        assert kept.freed(view, keep, counter) == expected


def test_a_rewrite_encodes_again_only_the_messages_it_changed_in_chat_completions(monkeypatch: Any) -> None:
    from contextfold.formats import openai_chat

    nonce = "mask-state-7f3c1e"  # (encodings are not remembered: any unique text will do)
    history = [Message("user", f"fix the loader {nonce}")]
    for i in range(5):
        history.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls {i}"})),)))
        history.append(Message("tool", f"output {i} of {nonce}", tool_call_id=f"c{i}", name="bash"))
    history.append(Message("assistant", "done"))
    view = View(MessageCounter(EstimatingCounter()))
    wire = get_format("openai_chat")
    for k in range(1, len(history), 2):  # a turn at a time, as the agent loop adds them
        view.append(history[k : k + 2] if k > 1 else history[: k + 2])
        view.encoded(wire)
    encoded: list[Message] = []
    original = openai_chat.encode_message

    def watched(message: Message, *ids: Any) -> dict[str, Any]:  # (ids: the history's wire ids of its calls)
        encoded.append(message)
        return original(message, *ids)

    monkeypatch.setattr(openai_chat, "encode_message", watched)
    changes = {i: _changed(history[i], "mask", i) for i in (2, 6)}  # two outputs of two turns
    view.rewrite(changes)
    assert view.encoded(wire) == [original(m) for m in view.normalized()]
    # The two placeholders and the tail, not their turns' calls (issue 22: a masking turn re-encoded each).
    assert [m for m in encoded if m.role != "assistant" or m.text != "done"] == list(changes.values())


def test_a_rewrite_of_the_settled_prefix_keeps_the_tail_normalized_and_counted(monkeypatch: Any) -> None:
    from contextfold.manager import _view

    nonce = "mask-state-tail-2b9d"
    history = [Message("user", f"fix it {nonce}")]
    for i in range(3):
        history.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls {i}"})),)))
        history.append(Message("tool", f"output {i} of {nonce}", tool_call_id=f"c{i}", name="bash"))
    counter = MessageCounter(EstimatingCounter())
    view = View(counter)
    view.append(history)
    before = view.totals()
    normalized: list[int] = []
    original = _view.normalize

    def watched(messages: Any, **kwargs: Any) -> list[Message]:
        normalized.append(len(messages))
        return original(messages, **kwargs)

    monkeypatch.setattr(_view, "normalize", watched)
    masked = _changed(history[2], "mask", 2)
    view.rewrite({2: masked})
    after = view.totals()
    assert normalized == []  # (the tail, the last call and its output, was normalized before the rewrite)
    assert after[0] == before[0] - counter.count_message(history[2]) + counter.count_message(masked)
    assert view.normalized() == normalize([*history[:2], masked, *history[3:]])


def test_a_masking_keeps_the_media_tally_and_a_media_change_counts_it_again(monkeypatch: Any) -> None:
    """A rewrite of text-only messages into text-only ones (masking's) keeps ``media_version``: the media tally is
    not recounted over the whole view (issue 22); a rewrite that drops an image is, and the tally shows it."""
    from contextfold.manager import _media
    from contextfold.messages import ImagePart

    nonce = "mask-media-5c1a9e"
    image = Message("user", (TextPart(f"see {nonce}"), ImagePart(data="aGVsbG8=", media_type="image/png")))
    history = [image]
    for i in range(4):
        history.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls {i}"})),)))
        history.append(Message("tool", f"output {i} of {nonce}", tool_call_id=f"c{i}", name="bash"))
    view = View(MessageCounter(EstimatingCounter()))
    view.append(history)
    view.normalized()
    guard = _media.MediaGuard(None)
    before = guard.tally(view.raw, (view.media_version, view.settle_edits))
    assert before.items == 1
    read: list[Message] = []
    original = _media.media_of

    def watched(message: Message) -> Any:
        read.append(message)
        return original(message)

    monkeypatch.setattr(_media, "media_of", watched)
    version = view.version
    view.rewrite({2: _changed(history[2], "mask", 2)})
    assert view.version > version
    assert guard.tally(view.raw, (view.media_version, view.settle_edits)) == before
    assert read == []  # (nothing appended, no media changed: nothing read)
    view.rewrite({0: Message("user", f"see {nonce} (image dropped)")})
    assert guard.tally(view.raw, (view.media_version, view.settle_edits)).items == 0
