"""Helpers for the compaction tests: a deterministic summarizer, a counter, a clock and a history strategy."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.pairing import normalize, pair_list
from contextfold.summarize.base import SummaryRequest, SummaryResult
from contextfold.tokens import EstimatingCounter, MessageCounter

try:  # tests/ as a package (tests/__init__.py) or as a plain folder on sys.path
    from tests.conftest import TRAJECTORIES, require
except ImportError:
    from conftest import TRAJECTORIES, require  # type: ignore[no-redef]

__all__ = ["TRAJECTORIES", "EchoSummarizer", "assert_valid", "clock", "counter", "histories", "require", "summaries"]

FIXED_TIME = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def clock() -> datetime:
    return FIXED_TIME


def counter() -> MessageCounter:
    return MessageCounter(EstimatingCounter(4.0))


class EchoSummarizer:
    """Deterministic: one line per message (role and first words), the previous summary first; lines containing
    ``KEEP:`` become retained facts. Records every request it gets.
    """

    def __init__(self, *, words: int = 6, pad: int = 0) -> None:
        self.words = words
        self.pad = pad  # extra words, to make over-long summaries
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        lines = []
        if request.previous_summary:
            lines.append(f"previously: {request.previous_summary}")
        retain: list[str] = []
        for m in request.messages:
            first = " ".join(m.text.split()[: self.words])
            lines.append(f"{m.role}: {first}")
            retain.extend(line.strip() for line in m.text.splitlines() if "KEEP:" in line)
        if self.pad:
            lines.append(" ".join(["padding"] * self.pad))
        return SummaryResult("\n".join(lines), retain=tuple(retain), summarizer="echo")


def assert_valid(messages: Sequence[Message]) -> None:
    """No orphan calls or results, and normalize() would change nothing."""
    assert normalize(messages) == list(messages)
    pairs = pair_list(messages)
    assert all(p.result_index is not None for p in pairs)
    results = [m.tool_call_id or "" for m in messages if m.role == "tool"]
    assert sorted(results) == sorted(p.call_id for p in pairs)


def summaries(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.kind == "summary"]


# -- a history strategy --------------------------------------------------------------------------------------------

_WORDS = st.sampled_from(["alpha", "beta", "gamma", "src/app.py", "KEEP: id-42", "error", "fix", "the", "a"])
TOOLS = ("bash", "read", "grep", "memory")


def _text(max_words: int) -> st.SearchStrategy[str]:
    return st.lists(_WORDS, min_size=1, max_size=max_words).map(" ".join)


@st.composite
def histories(draw: st.DrawFn, *, max_steps: int = 14) -> list[Message]:
    """Realistic agent histories: optional system prompt, user turns, assistant steps with 0-3 tool calls and their
    results, some protected messages, an occasional earlier summary and ``<turn-aborted>`` marker.
    """
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message.system(draw(_text(30))))
    if draw(st.integers(0, 4)) == 0:
        out.append(Message.user("[contextfold summary v2 — 9 earlier messages compacted]\nold summary text",
                                meta={"kind": "summary", "summary_version": 2, "compacted_count": 9}))
    call_no = 0
    for _ in range(draw(st.integers(1, max_steps))):
        step = draw(st.sampled_from(["user", "assistant", "tools", "tools", "aborted"]))
        if step == "user":
            out.append(Message.user(draw(_text(60)), meta={"protected": True} if draw(st.integers(0, 6)) == 0 else {}))
        elif step == "aborted":
            out.append(Message.user("<turn-aborted>The user interrupted the previous turn.</turn-aborted>"))
        elif step == "assistant":
            out.append(Message.assistant(draw(_text(40))))
        else:
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                call_no += 1
                calls.append(ToolCall(f"call_{call_no}", draw(st.sampled_from(TOOLS)), '{"arg": 1}'))
            out.append(Message.assistant(draw(st.sampled_from(["", "running"])), calls))
            for call in calls:
                out.append(Message.tool(call.id, draw(_text(150)), name=call.name))
    return normalize(out)
