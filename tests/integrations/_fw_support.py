"""The 50-turn tool-using scenario the framework integration tests share, and what must hold after it."""

from __future__ import annotations

from contextfold import ContextManager
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

# Small enough that the scenario's tool outputs (about 50 × 3 KB ≈ 40K tokens) overflow it many times over.
WINDOW = 8_000
TURNS = 50
FINAL_ANSWER = "All 50 log pages read: the build fails in module_49."
# Lines per tool output: about 3 KB of text, a typical build-log page.
LOG_LINES = 80


def log_page(page: int) -> str:
    """What the scripted tool returns: a few KB of build log."""
    lines = [f"line {i}: compiling module_{page}_{i} ... ok" for i in range(LOG_LINES)]
    return f"build log page {page}\n" + "\n".join(lines)


def thought(page: int) -> str:
    """What the model says with each call: reasoning that cannot be masked, so summarizing is needed too."""
    return (f"Page {page - 1} compiled cleanly; module_{page - 1} and its {LOG_LINES} units need no change. "
            f"Next I read page {page} to look for the first failing module, keeping the pages read so far in mind: "
            + ", ".join(f"page {p} ok" for p in range(max(0, page - 12), page)))


def scripted_replies(turns: int = TURNS) -> list[Reply | str]:
    """The model reads one log page per turn, fifty times (or ``turns``), then answers."""
    calls: list[Reply | str] = [
        Reply.calling(ScriptedToolCall("read_log", {"page": page}, id=f"call_{page}"), text=thought(page))
        for page in range(turns)]
    return [*calls, FINAL_ANSWER]


def make_manager(session_id: str) -> ContextManager:
    """A manager for the scenario's small window, all in memory."""
    return ContextManager(model="gpt-4o", max_context_tokens=WINDOW, store="memory", archive="memory",
                          session_id=session_id)


def assert_scenario_held(server: ScriptedLLMServer, cm: ContextManager, turns: int = TURNS) -> None:
    """Every request valid and inside the window; the manager had to act; all turns reached the model."""
    assert [r.invalid for r in server.invalid_requests] == []
    statuses = [r.status for r in server.requests]
    assert statuses == [200] * len(statuses), statuses
    assert len(server.requests) == turns + 1
    assert server.pending == 0
    assert max(r.input_tokens for r in server.requests) <= WINDOW
    if turns == TURNS:  # the reasoning alone outgrows the window: the scenario cannot finish without summaries
        assert cm.compactions >= 1, (cm.maskings, cm.compactions)
    else:
        assert cm.compactions + cm.maskings >= 1
    # The latest observation reaches the model whole (only older ones are masked or summarized).
    assert f"build log page {turns - 1}" in str(server.requests[-1].body)
