"""Planning a history of copies (issue 22): a copy given only its own id is checked and classified once per origin.

A manager's view holds a copy of each message it was given (``with_meta(id=...)``); a repeated history holds ~30
copies of each. The copies share the role, content, calls and meta values of their origin, so what is read from
those is read once per origin, and every answer is the one the message gets on its own.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import pairing
from contextfold.compaction import classification
from contextfold.compaction._partition import Unit, build_units, partition
from contextfold.compaction.classification import classify, classify_all
from contextfold.compaction.policy import Policy
from contextfold.errors import InvalidHistory
from contextfold.messages import Message, ToolCall
from contextfold.pairing import pair_list

_NONCE = "copies-41d2"


def _session(turns: int, seed: int) -> list[Message]:
    rng = random.Random(seed)
    out = [Message.system("you help"), Message.user(f"{_NONCE} fix the failing test")]
    for t in range(turns):
        name = rng.choice(["bash", "read", "todo_write"])
        calls = [ToolCall(f"c{t}_{k}", name, '{"cmd": "ls"}') for k in range(rng.randint(1, 2))]
        out.append(Message.assistant(rng.choice(["", "I will run it. " * rng.randint(1, 40)]), calls,
                                     meta={"protected": True} if rng.random() < 0.1 else {}))
        out += [Message.tool(c.id, rng.choice(["ok", "Traceback (most recent call last):\n" * 30]), name=c.name)
                for c in calls]
        if rng.random() < 0.3:
            out.append(Message.user(rng.choice(["OBSERVATION: done", "please keep going", "```\n{}\n```\n" * 200])))
    return out


def _with_ids(history: list[Message], copies: int) -> list[Message]:
    """``history`` repeated ``copies`` times, each message a copy with its own id (as a manager numbers them)."""
    return [m.with_meta(id=f"s:{n}:{i}") for n in range(copies) for i, m in enumerate(history)
            if n == 0 or m.role != "system"]


def _rebuilt(m: Message) -> Message:
    return Message(m.role, m.content, m.tool_calls, m.tool_call_id, m.name, dict(m.meta), dict(m.extra))


def test_copies_are_classified_once_per_origin_as_each_would_be_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    history = _with_ids(_session(12, 1), 4)
    expected = [classify(_rebuilt(m)) for m in history]
    read: list[Message] = []
    real = classification.classify
    monkeypatch.setattr(classification, "classify", lambda m: read.append(m) or real(m))
    assert classify_all(history) == expected
    assert len(read) == len({id(m._origin) for m in history})


def test_copies_are_checked_once_per_origin_and_other_messages_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    history = _with_ids(_session(6, 2), 5)
    checked: list[object] = []
    real = pairing._check_call
    monkeypatch.setattr(pairing, "_check_call", lambda call, i, k: checked.append(call) or real(call, i, k))
    assert pairing.check_messages(history) == history
    assert len(checked) == sum(len(m.tool_calls) for m in history[: len(history) // 5 + 1])
    bad = Message.assistant("", [ToolCall("c9", "read", '{"a": 1}')])
    # (the same fields, not a copy: a message made anew is checked, and a bad one refused wherever it stands)
    broken = Message("assistant", bad.content, (ToolCall("c9", "", '{"a": 1}'),))
    with pytest.raises(InvalidHistory, match="has no name"):
        pairing.check_messages([*history, bad.with_meta(id="x"), broken.with_meta(id="y")])


def _units_alone(messages: list[Message]) -> list[Unit]:
    """The units as their definition says: a call message with all its results, any other message alone."""
    results: dict[int, list[int]] = {}
    for pair in pair_list(messages):
        results.setdefault(pair.call_index, []).extend([] if pair.result_index is None else [pair.result_index])
    owned = {r for group in results.values() for r in group}
    return [Unit((i, *sorted(results[i])), io=True) if i in results else Unit((i,), io=m.role == "tool")
            for i, m in enumerate(messages) if i not in owned]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 15), st.integers(1, 4), st.integers(0, 10**6), st.booleans())
def test_a_partition_of_copies_is_the_partition_of_the_messages_made_anew(turns: int, copies: int, seed: int,
                                                                         shuffled: bool) -> None:
    history = _with_ids(_session(turns, seed), copies)
    if shuffled:  # (not normalized: results away from their calls, orphans)
        random.Random(seed).shuffle(history)
    alone = [_rebuilt(m) for m in history]
    assert build_units(history) == _units_alone(history)
    policy = Policy(protected_tools=("todo_write",))
    tokens = [len(m.text) // 4 + 3 for m in history]
    got, expected = partition(history, policy, tokens), partition(alone, policy, tokens)
    assert (got.categories, got.pinned, got.protected, got.summaries, got.retained, got.units, got.answered) == (
        expected.categories, expected.pinned, expected.protected, expected.summaries, expected.retained,
        expected.units, expected.answered)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 10**6), st.booleans(), st.booleans())
def test_the_summary_input_is_normalized_as_the_messages_alone_would_be(turns: int, seed: int, whole_units: bool,
                                                                        normalized: bool) -> None:
    from contextfold.compaction._compact import normalized_with_pairs, normalized_within, pairs_within
    from contextfold.pairing import normalize

    rng = random.Random(seed)
    history = _session(turns, seed)
    view = normalize(history) if normalized else history
    if not normalized:  # (a result away from its call, an orphan)
        rng.shuffle(view)
    pairs = pair_list(view)
    if whole_units:
        chosen = sorted(i for unit in build_units(view, pairs) if rng.random() < 0.6 for i in unit.indices)
    else:
        chosen = sorted(rng.sample(range(len(view)), rng.randint(0, len(view))))
    subset = [view[i] for i in chosen]
    got = normalized_within(subset, pairs, chosen)
    assert got == normalized_with_pairs(subset, pairs_within(pairs, chosen))[0]
    assert got == normalize(subset)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 10**6), st.booleans(), st.integers(0, 3), st.integers(0, 3))
def test_what_stays_recent_is_each_unit_holding_an_answered_message(turns: int, seed: int, shuffled: bool,
                                                                     pairs_kept: int, turns_kept: int) -> None:
    from contextfold.compaction._partition import Keep, recent_indices, select_user_messages
    from contextfold.pairing import normalize

    history = _session(turns, seed)
    view = history if shuffled else normalize(history)
    if shuffled:  # (a result far from its call: the unit holding it does not start just before it)
        random.Random(seed).shuffle(view)
    part = partition(view, Policy(protected_tools=("todo_write",)), [len(m.text) // 4 + 3 for m in view])
    keep = Keep(turns_kept, pairs_kept, 50, 1)
    got = recent_indices(view, part, keep)
    answered = set(part.answered or ())
    expected = {i for unit in part.units if answered.intersection(unit.indices) for i in unit.indices}
    assert expected <= got
    assert got - expected == recent_indices(view, part, Keep(turns_kept, pairs_kept, 50, 1, answered=False)) - expected
    leaving = sorted(i for unit in part.units for i in unit.indices if i not in got)
    requests = [i for i in leaving if view[i].role == "user" and part.categories[i] is not classification.Category.FACT
                and view[i].kind != "placeholder"]
    assert set(select_user_messages(view, part, leaving, keep)) <= set(requests)
