"""Invariants of compaction on random histories (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.compaction import Policy, compact
from contextfold.compaction._partition import build_units
from contextfold.errors import InsufficientBudget
from contextfold.messages import Message
from contextfold.pairing import tool_pairs

try:  # tests/ as a package (tests/__init__.py) or as a plain folder on sys.path
    from tests.test_compact_support import EchoSummarizer, assert_valid, clock, counter, histories, summaries
except ImportError:
    from test_compact_support import EchoSummarizer, assert_valid, clock, counter, histories, summaries  # type: ignore[no-redef]

KINDS = st.sampled_from(["soft", "hard", "emergency"])
POLICIES = st.builds(
    Policy,
    keep_recent_turns=st.integers(0, 6),
    keep_tool_io_pairs=st.integers(0, 4),
    user_message_budget=st.integers(0, 600),
    retain_last_turns=st.integers(0, 2),
    summary_max_tokens=st.integers(20, 400),
    protected_tools=st.sampled_from([(), ("memory",)]),
    roles_never_prune=st.sampled_from([("system", "developer"), ("system", "assistant"), ("user",), ("tool",), ()]),
)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _must_survive(messages: list[Message], policy: Policy) -> list[Message]:
    """Pinned messages and whole protected tool call groups, worked out independently of the engine."""
    ours = {"summary", "retain", "placeholder"}
    keep = {i for i, m in enumerate(messages)
            if m.protected or (m.role in policy.roles_never_prune and m.kind not in ours)
            or (m.role == "tool" and m.name in policy.protected_tools)
            or any(c.name in policy.protected_tools for c in m.tool_calls)}
    pairs = tool_pairs(messages)
    changed = True
    while changed:  # a kept call keeps its results and a kept result its call (and that call's other results)
        changed = False
        for call_index, result_index in pairs.values():
            if result_index is not None and (call_index in keep) != (result_index in keep):
                keep |= {call_index, result_index}
                changed = True
    return [messages[i] for i in sorted(keep)]


@SETTINGS
@given(history=histories(), policy=POLICIES, kind=KINDS, budget=st.integers(50, 4_000))
def test_compaction_fits_or_raises_and_keeps_invariants(history: list[Message], policy: Policy, kind: str,
                                                        budget: int) -> None:
    c = counter()
    try:
        result = compact(history, policy=policy, counter=c, summarizer=EchoSummarizer(), budget=budget,
                         kind=kind, clock=clock)  # type: ignore[arg-type]
    except InsufficientBudget as exc:
        # only when pinned and protected messages (plus an empty summary) really exceed the budget, or with them
        # the user request being answered cannot stay (it is refused rather than silently dropped)
        fixed = sum(c.count_message(m) for m in _must_survive(history, policy))
        if "user message being answered" in str(exc):
            request = [m for m in history if m.role == "user" and m.kind is None][-1]
            assert fixed + c.count_message(request) > budget - 460  # 460: the most a summary reserve takes
        else:
            assert fixed > budget - 60
        assert exc.needed > exc.budget == budget
        return
    out = result.messages
    if result.changed:
        assert c.count_messages(out) <= budget
    # pinned and protected survive byte for byte: the very same objects, in their original relative order
    survivors = _must_survive(history, policy)
    positions = [next(i for i, o in enumerate(out) if o is m) for m in survivors]
    protected_positions = [p for p, m in zip(positions, survivors, strict=True) if m.role in ("assistant", "tool")]
    assert protected_positions == sorted(protected_positions)
    assert_valid(out)
    assert len(summaries(out)) <= 1
    if result.changed:
        assert len(summaries(out)) == 1
        # nothing silently lost: every input message is in the view or in `removed`
        gone = {id(m) for m in result.removed}
        kept = {id(m) for m in out}
        assert all(id(m) in gone or id(m) in kept for m in history)
        assert not gone & kept


@SETTINGS
@given(history=histories(), extra=histories(max_steps=6), policy=POLICIES)
def test_recompaction_never_nests_and_increments_the_version(history: list[Message], extra: list[Message],
                                                             policy: Policy) -> None:
    c = counter()
    kw = {"policy": policy, "counter": c, "clock": clock, "budget": 3_000}
    try:
        first = compact(history, summarizer=EchoSummarizer(), **kw)  # type: ignore[arg-type]
        if not first.changed:
            return
        grown = [*first.messages, *(m for m in extra if m.role != "system" and m.kind != "summary")]
        summarizer = EchoSummarizer()
        second = compact(grown, summarizer=summarizer, compaction_count=1, **kw)  # type: ignore[arg-type]
    except InsufficientBudget:
        return
    if not second.changed:
        return
    (old,) = summaries(first.messages)
    (new,) = summaries(second.messages)
    assert new.meta["summary_version"] == old.meta["summary_version"] + 1
    assert new.text.count("[contextfold summary") == 1
    (request,) = summarizer.requests
    assert all(m.kind != "summary" for m in request.messages)
    assert_valid(second.messages)


@SETTINGS
@given(history=histories())
def test_units_cover_every_message_once(history: list[Message]) -> None:
    seen = [i for unit in build_units(history) for i in unit.indices]
    assert sorted(seen) == list(range(len(history)))
