"""A long first settle (a resumed history) is checked against one pairing, and normalized only if it must be (issue 22).

The view's first settle of the 100,000 recorded messages normalized them (two pairings, four copies) although they
were normalized already. The settled view, its pairs and its counts are what normalizing gives, either way.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.manager import _view
from contextfold.manager._view import View
from contextfold.messages import Message, ToolCall
from contextfold.pairing import normalize, pair_list
from contextfold.tokens import counter_for_model

NONCE = "fs3k8v"
TURNS = 5_000  # 10,003 messages: at least _view.CHECK_FIRST_MIN_MESSAGES


def _history(turns: int) -> list[Message]:
    out = [Message.system(f"agent {NONCE}"), Message.user(f"task {NONCE}")]
    for t in range(turns):
        out += [Message.assistant("", [ToolCall(f"c{t}", "bash", f'{{"cmd": "ls {t % 7}"}}')]),
                Message.tool(f"c{t}", f"out {t % 5} {NONCE}", name="bash")]
    return [*out, Message.assistant(f"done {NONCE}")]


def _settled(messages: list[Message]) -> View:
    view = View(counter_for_model("gpt-4o"))
    view.append(messages)
    view.totals()  # (settles up to the last assistant message)
    return view


def _expect_same_as_normalizing(view: View, messages: list[Message]) -> None:
    expected = normalize(messages)
    assert view.normalized() == expected
    assert view.pairs() == pair_list(expected)
    assert view.counts() == view.counter.count_each(expected)


def test_a_long_normalized_history_is_settled_without_normalizing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    normalized: list[int] = []
    normalize_ = _view.normalize

    def counted(messages: Any, **kw: Any) -> list[Message]:
        normalized.append(len(messages))
        return normalize_(messages, **kw)

    monkeypatch.setattr(_view, "normalize", counted)
    messages = _history(TURNS)
    view = _settled(messages)
    assert max(normalized, default=0) < 10  # (the tail only, after the last assistant message)
    monkeypatch.setattr(_view, "normalize", normalize_)
    _expect_same_as_normalizing(view, messages)


def test_a_long_history_that_is_not_normalized_settles_as_normalizing_it() -> None:
    messages = _history(TURNS)
    orphan = Message.tool("nowhere", f"orphan {NONCE}")
    unanswered = Message.assistant("", [ToolCall("c-open", "bash", "{}")])
    broken = [*messages[:100], orphan, *messages[100:5_000], unanswered, *messages[5_000:]]
    view = _settled(broken)
    _expect_same_as_normalizing(view, broken)
    assert orphan in view.dropped
