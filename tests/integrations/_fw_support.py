"""The 50-turn tool-using scenario the framework integration tests share, and what must hold after it."""

from __future__ import annotations

import json
import re

from contextfold.manager import ContextManager
from contextfold.testing.server import RecordedRequest, ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

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


# -- exact request shapes -------------------------------------------------------------------------------------------
# Characters of a text kept in a request's shape: enough to tell every scripted message apart.
SHAPE_CHARS = 40


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def shape(request: RecordedRequest) -> list[str]:
    """The conversation a request carried, one short line per message, the same for Chat and Responses."""
    out: list[str] = []
    for item in request.items:
        kind = item.get("type")
        if kind == "function_call":
            out.append(f"call {item['name']} {item['call_id']}")
        elif kind == "function_call_output":
            out.append(f"output {item['call_id']} {_text(item['output'])[:SHAPE_CHARS]}")
        elif item.get("role") == "tool":
            out.append(f"output {item['tool_call_id']} {_text(item['content'])[:SHAPE_CHARS]}")
        else:
            text = _text(item.get("content"))
            if text or not item.get("tool_calls"):
                out.append(f"{item['role']} {text[:SHAPE_CHARS]}")
            out.extend(f"call {c['function']['name']} {c['id']}" for c in item.get("tool_calls") or ())
    return out


def run_script(run: int) -> list[Reply | str]:
    """Run ``run`` of a multi-run conversation: the model reads log page ``run``, then answers."""
    return [Reply.calling(ScriptedToolCall("read_log", {"page": run}, id=f"call_{run}")), f"answer {run}"]


def expected_requests(runs: int, head: list[str]) -> list[list[str]]:
    """What every request of ``runs`` runs of :func:`run_script` must carry, exactly: each message once, in order."""
    requests: list[list[str]] = []
    history = list(head)
    for run in range(runs):
        history.append(f"user question {run}")
        requests.append(list(history))
        history += [f"call read_log call_{run}", f"output call_{run} {log_page(run)[:SHAPE_CHARS]}"]
        requests.append(list(history))
        history.append(f"assistant answer {run}")
    return requests


# -- retrieval round trip -------------------------------------------------------------------------------------------
BIG_ROWS = 2_800  # about 100 KB
TARGET_ROW = 1_234


def big_output() -> str:
    """About 100 KB of rows: far over the in-context limit, so it is cut at write time."""
    return "\n".join(f"row {i:05d}: checksum {i * 7919 % 100_003:06d} status ok" for i in range(1, BIG_ROWS + 1))


def target_row() -> str:
    return f"row {TARGET_ROW:05d}: checksum {TARGET_ROW * 7919 % 100_003:06d} status ok"


def retrieval_handler(request: RecordedRequest) -> Reply | str:
    """The model after the big output: read the row it needs by ref, then answer with it."""
    last = json.dumps(request.items[-1])
    if target_row() in last and "omitted" not in last:
        return f"found: {target_row()}"
    match = re.search(r"ref=(tout_[0-9a-f]+)", json.dumps(request.items))
    assert match is not None, "the cut output names its ref"
    return Reply.calling(ScriptedToolCall("tool_output_cache", {"ref_id": match.group(1), "offset": TARGET_ROW,
                                                                "limit": 1}, id="call_read"))


# -- graceful degradation -------------------------------------------------------------------------------------------
class FailingSummarizer:
    """A summarizer whose every call fails, as a broken LLM summarizer would."""

    def summarize(self, request: object) -> object:
        from contextfold.errors import SummarizerError

        raise SummarizerError("the summary model is down")


DEGRADE_WINDOW = 2_000
DEGRADE_TURNS = 8


def degrading_manager(session_id: str, telemetry: object) -> ContextManager:
    """A small window and a summarizer that always fails: compaction is due and cannot succeed."""
    return ContextManager(model="gpt-4o", max_context_tokens=DEGRADE_WINDOW, store="memory", archive="memory",
                          session_id=session_id, telemetry=telemetry, summarizer=FailingSummarizer())


def assert_degraded(events: list[object]) -> None:
    codes = [getattr(e, "code", "") for e in events]
    assert "adapter_degraded" in codes, codes
