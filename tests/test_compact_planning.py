"""Planning a compaction pairs the view once (issue 22): the normalized check must agree with ``normalize``."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import pairing
from contextfold.compaction._compact import _is_normalized, normalized_with_pairs
from contextfold.compaction._partition import build_units, partition
from contextfold.compaction.policy import Policy
from contextfold.errors import InvalidHistory
from contextfold.messages import Message, ToolCall
from contextfold.pairing import BOUNDARY_KIND, normalize, pair_list, tool_pairs

try:  # tests/ as a package or as a plain folder on sys.path
    from tests.core.test_normalize import messy_histories
except ImportError:
    from core.test_normalize import messy_histories  # type: ignore[no-redef]


def call(i: int, name: str = "run") -> ToolCall:
    return ToolCall(f"c{i}", name, "{}")


@given(messy_histories())
@settings(max_examples=150, deadline=None)
def test_a_history_found_normalized_is_what_normalize_returns_and_every_normalized_one_is_found(
        history: list[Message]) -> None:
    if _is_normalized(history, pair_list(history)):
        out = normalize(history)
        assert len(out) == len(history) and all(a is b for a, b in zip(out, history, strict=True))
    fixed = normalize(history)
    assert _is_normalized(fixed, pair_list(fixed))
    view, pairs = normalized_with_pairs(list(history))
    assert view == fixed and pairs == pair_list(fixed)


def test_each_broken_invariant_is_seen() -> None:
    u, a = Message.user("go"), Message.assistant("ok")
    calls = Message.assistant("", [call(1), call(2)])
    r1, r2 = Message.tool("c1", "one"), Message.tool("c2", "two")
    ok = [Message.system("s"), u, calls, r1, r2, a]
    assert _is_normalized(ok, pair_list(ok))
    broken = {
        "a result missing": [u, calls, r1, a],
        "results out of call order": [u, calls, r2, r1, a],
        "a result after another message": [u, calls, r1, a, r2],
        "an orphan result": [u, Message.tool("c9", "ghost"), a],
        "a second result": [u, calls, r1, r2, Message.tool("c1", "again")],
        "an id twice in one message": [u, Message.assistant("", [call(1), call(1)]), r1, r1],
        "an empty assistant message": [u, Message.assistant(" \n"), a],
        "opening with the assistant": [Message.system("s"), a, u],
        "opening with a result": [r1, u],
    }
    for name, history in broken.items():
        assert not _is_normalized(history, pair_list(history)), name
        assert normalize(history) != history, name
    boundary = Message("assistant", "compacted", meta={"kind": BOUNDARY_KIND})
    opened = [boundary, a]
    assert _is_normalized(opened, pair_list(opened))


def test_units_and_answered_from_handed_pairs_are_those_found_alone() -> None:
    history = [Message.user("go"), Message.assistant("", [call(1), call(2)]), Message.tool("c1", "one"),
               Message.tool("c2", "two"), Message.assistant("", [call(1)]), Message.tool("c1", "reused id")]
    pairs = pair_list(history)
    assert build_units(history, pairs) == build_units(history)
    expected = {c for c, r in tool_pairs(history).values()} | {r for c, r in tool_pairs(history).values() if r}
    assert {i for u in build_units(history, pairs) for i in u.indices if len(u.indices) > 1} == expected
    part = partition(history, Policy(), [10] * len(history), pairs)
    assert part.answered == (4, 5)


def test_arguments_found_valid_are_not_parsed_again_and_bad_ones_always_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:

    good, bad = '{"path": "a.py"}', '["not", "an object"]'
    parsed: list[str] = []
    real = json.loads
    monkeypatch.setattr(pairing.json, "loads", lambda text: parsed.append(text) or real(text))
    history = [Message.user("go"), Message.assistant("", [ToolCall("c1", "read", good)]), Message.tool("c1", "ok")]
    pairing.check_messages(history)
    pairing.check_messages([m.with_meta(id="copy") for m in history])
    assert parsed == [good]  # (the copy's call shares the string: parsed once)
    for _ in range(2):
        with pytest.raises(InvalidHistory, match="must be a JSON object"):
            pairing.check_messages([Message.assistant("", [ToolCall("c2", "read", bad)])])
    assert parsed == [good, bad, bad]


def test_a_plan_from_the_counts_and_pairs_a_view_keeps_is_the_plan_made_alone() -> None:
    from contextfold.compaction import plan_compaction
    from contextfold.tokens import EstimatingCounter, MessageCounter

    counter = MessageCounter(EstimatingCounter(4.0))
    history: list[Message] = [Message.system("you are an agent")]
    for i in range(40):
        history += [Message.user(f"step {i}: read file {i} " * 3), Message.assistant("", [call(i)]),
                    Message.tool(f"c{i}", f"output {i} " * (20 + i))]
    counts, pairs = [counter.count_message(m) for m in history], pair_list(history)
    for kind, budget in (("hard", 900), ("soft", 1500), ("emergency", 700)):
        alone = plan_compaction(history, policy=Policy(), counter=counter, budget=budget, kind=kind)
        handed = plan_compaction(history, policy=Policy(), counter=counter, budget=budget, kind=kind,
                                 counted=(counts, pairs))
        assert handed == alone, kind
    # Handed for a history that is not normalized (a result missing): normalized, paired and counted here instead.
    broken = [*history[:-1], Message.assistant("done")]
    alone = plan_compaction(broken, policy=Policy(), counter=counter, budget=900)
    handed = plan_compaction(broken, policy=Policy(), counter=counter, budget=900,
                             counted=([counter.count_message(m) for m in broken], pair_list(broken)))
    assert handed == alone and len(handed.messages) == len(broken) + 1  # (the missing result put in)


@given(messy_histories(), st.randoms(use_true_random=False))
@settings(max_examples=60, deadline=None)
def test_the_pairs_of_whole_units_are_read_from_the_pairs_of_the_view(history: list[Message],
                                                                        rng: random.Random) -> None:
    from contextfold.compaction._compact import pairs_within

    view = normalize(history)
    pairs = pair_list(view)
    units = build_units(view, pairs)
    chosen = sorted(i for unit in units if rng.random() < 0.5 for i in unit.indices)
    subset = [view[i] for i in chosen]
    assert pairs_within(pairs, chosen) == pair_list(subset)
    assert normalized_with_pairs(subset, pairs_within(pairs, chosen)) == normalized_with_pairs(subset)
