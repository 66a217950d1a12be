"""Adversarial cases found by the runtime property tests, each pinned by a regression test.

Late tool results, masking that cannot help, no tool output cache, a second manager on the same session, redaction
turned off, and a background compaction racing with the agent.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.answered import has_real_content
from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.compaction import Policy
from contextfold.formats import FORMATS, get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.pairing import ABORTED_OUTPUT_TEXT, normalize, pair_list
from contextfold.summarize.base import SummaryRequest, SummaryResult
from contextfold.summarize.extractive import ExtractiveSummarizer
from contextfold.telemetry import CompactWarning, RecordingTelemetry


def manager(window: int = 1_000_000, **kw: Any) -> ContextManager:
    kw.setdefault("store", "memory")
    kw.setdefault("archive", "memory")
    return ContextManager("gpt-4o", max_context_tokens=window, session_id="adv", redact=False, **kw)


def call(call_id: str, name: str = "bash") -> ToolCall:
    return ToolCall(call_id, name, json.dumps({"cmd": f"run {call_id}"}))


def assert_valid(view: list[Message]) -> None:
    for name in FORMATS:
        wire = get_format(name)
        wire.validate(wire.encode(view))
    assert all(p.result_index is not None for p in pair_list(view))


def output(call_id: str, lines: int) -> str:
    return "\n".join(f"result {call_id}-{j} " + "lorem ipsum dolor " * 5 for j in range(lines))


# -- a result that arrives after the agent moved on ----------------------------------------------------------------


def test_late_result_takes_the_place_of_its_aborted_output() -> None:
    # Found by the property test: once the view settled past the call (with a synthetic "aborted" output), the real
    # result was an orphan, dropped by normalization, and neither in the view nor archived.
    cm = manager()
    cm.add([Message.user("go"), Message.assistant("", [call("c1")]), Message.assistant("still waiting")])
    assert cm.prepare()[2]["content"] == ABORTED_OUTPUT_TEXT  # the view settled past the call
    cm.add(Message.tool("c1", "the real output", meta={"id": "late"}))
    view = cm.messages()
    assert [m.text for m in view] == ["go", "", "the real output", "still waiting"]
    assert view[2].meta["id"] == "late"
    assert_valid(view)
    assert cm.prepare("openai_chat")[2] == {"role": "tool", "tool_call_id": "c1", "content": "the real output"}


def test_late_result_after_masking_replaced_the_view() -> None:
    # After masking or compaction the synthetic outputs are stored messages anywhere in the view, not only in the
    # settled prefix; a late result must still find its place.
    cm = manager()
    cm.add([Message.user("go"), Message.assistant("", [call("c1")]), Message.assistant("moving on")])
    cm.prepare()
    cm._view.replace(cm.messages())  # what masking and compaction do
    cm.add(Message.tool("c1", "late but real"))
    assert [m.text for m in cm.messages()] == ["go", "", "late but real", "moving on"]


def test_a_reused_id_answers_the_open_call_not_the_aborted_one() -> None:
    cm = manager()
    cm.add([Message.user("go"), Message.assistant("", [call("c1")]), Message.assistant("again")])
    cm.prepare()
    cm.add(Message.assistant("", [call("c1")]))  # the agent reuses the id for a new call, still open
    cm.add(Message.tool("c1", "answers the new call"))
    view = cm.messages()
    assert [m.text for m in view] == ["go", "", ABORTED_OUTPUT_TEXT, "again", "", "answers the new call"]
    assert_valid(view)


@st.composite
def late_sessions(draw: st.DrawFn) -> list[tuple[str, list[Message]]]:
    """Steps of a session whose results often arrive after later assistant messages (unique call ids)."""
    steps: list[tuple[str, list[Message]]] = [("add", [Message.user("start")])]
    pending: list[str] = []
    for k in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["calls", "text", "user", "results", "prepare"]))
        if kind == "calls":
            ids = [f"c{k}_{j}" for j in range(draw(st.integers(1, 3)))]
            pending.extend(ids)
            steps.append(("add", [Message.assistant("", [call(i) for i in ids])]))
        elif kind == "text":
            steps.append(("add", [Message.assistant(f"text {k}")]))
        elif kind == "user":
            steps.append(("add", [Message.user(f"user {k}")]))
        elif kind == "results" and pending:
            chosen = draw(st.permutations(pending))[: draw(st.integers(1, len(pending)))]
            for i in chosen:
                pending.remove(i)
            steps.append(("add", [Message.tool(i, f"out {i}") for i in chosen]))
        else:
            steps.append(("prepare", []))
    return steps


@given(late_sessions())
@settings(max_examples=60, deadline=None)
def test_incremental_view_equals_normalizing_everything_added(steps: list[tuple[str, list[Message]]]) -> None:
    cm = manager()
    added: list[Message] = []
    for kind, batch in steps:
        if kind == "prepare":
            cm.prepare()
            continue
        cm.add(batch)
        added.extend(batch)
        expected = normalize(added)
        assert [m.fingerprint() for m in cm.messages()] == [m.fingerprint() for m in expected]


def test_result_for_a_call_compacted_away_is_kept_somewhere() -> None:
    cm = manager(window=4_000)
    cm.add([Message.user("go"), Message.assistant("", [call("c1")]), Message.assistant("moving on")])
    for i in range(12):
        cm.add([Message.user(f"request {i} " + "words " * 60), Message.assistant(f"answer {i}")])
    # the call leaves the view (as a compaction that summarized it would do), archived first
    cm.rewrite_view(lambda view: [m for m in view if not m.tool_calls and m.role != "tool"], reason="test")
    assert not any(c.id == "c1" for m in cm.messages() for c in m.tool_calls)
    cm.add(Message.tool("c1", "very late output", meta={"id": "very-late"}))
    assert not any(m.meta.get("id") == "very-late" for m in cm.messages())  # an orphan in the view: never sent
    history = cm.archive.restore_history("adv", cm.messages(), keep_meta=("id",))
    assert any(m.meta.get("id") == "very-late" for m in history)


# -- masking that cannot help --------------------------------------------------------------------------------------


def search_batch(n: int) -> list[Message]:
    calls = [call(f"s{i}", "search") for i in range(n)]
    return [Message.assistant("", calls), *(Message.tool(c.id, output(c.id, 40), name="search") for c in calls)]


def test_prepare_compacts_when_masking_cannot_free_enough() -> None:
    # The plan said "mask" (tool outputs far over their budget), but every output belongs to an excluded tool:
    # masking freed nothing and prepare() returned a view over the window itself, with automatic compaction on.
    cm = manager(window=20_000, policy=Policy(exclude_tools=("search",), tool_output_budget_tokens=4_000))
    cm.add([Message.user("find it"), *search_batch(26)])
    cm.prepare()
    assert cm.tokens() <= cm.budgets.hard
    # The 26 results are what the model answers (contextfold.answered): they stay in view, never masked.
    view = cm.messages()
    assert [m.tool_call_id for m in view if m.role == "tool" and m.kind != "masked"] == [f"s{i}" for i in range(26)]


def test_answered_results_bigger_than_the_budget_are_cut_harder_not_summarized_away() -> None:
    # 26 results of ~1,000 tokens each are what the model answers, and together they overflow the hard threshold:
    # each is re-cut to an equal share with real content (its first and last lines), never replaced by a summary.
    telemetry = RecordingTelemetry()
    cm = manager(window=20_000, telemetry=telemetry,
                 policy=Policy(exclude_tools=("search",), tool_output_budget_tokens=6_000))
    cm.add([Message.user("find it"), *search_batch(26)])
    assert cm.tokens() > cm.budgets.hard
    cm.prepare()
    view = cm.messages()
    assert cm.tokens() <= cm.budgets.hard and view[0].text == "find it"
    results = [m for m in view if m.role == "tool"]
    assert [m.tool_call_id for m in results] == [f"s{i}" for i in range(26)]
    for m in results:
        full = output(m.tool_call_id or "", 40)
        assert m.kind == "truncated" and has_real_content(full, m.text)
        assert m.text.startswith(f"result {m.tool_call_id}-0 ") and f"result {m.tool_call_id}-39 " in m.text
        assert cm.cache is not None and cm.cache.get(str(m.meta["ref"])) == full
    assert [e.code for e in telemetry.events if isinstance(e, CompactWarning)].count("answered_recut") == 1


def test_mask_plan_without_a_tool_output_cache() -> None:
    # store=None: the plan "mask" went on to compact(kind="mask"), a ConfigError that fed the circuit breaker.
    cm = manager(window=20_000, store=None, policy=Policy(tool_output_budget_tokens=4_000))
    cm.add([Message.user("find it"), *search_batch(26)])
    cm.prepare()
    assert cm.failed_compactions == 0 and not cm.paused
    assert cm.tokens() <= cm.budgets.hard


# -- the archive ---------------------------------------------------------------------------------------------------


def test_a_second_manager_on_the_same_session_loses_nothing() -> None:
    # Ids were "<session>:<n>" with n restarting in every manager: a restarted process (or another worker) gave
    # its messages the ids of archived ones, and restore_history merged them away.
    archive = Archive(MemoryArchiveStore())
    first = manager(archive=archive)
    first.add([Message.user("first run"), Message.assistant("first answer")])
    first.compact()
    first.close()
    second = manager(archive=archive)
    second.add([Message.user("second run"), Message.assistant("second answer")])
    second.compact()
    texts = [m.text for m in archive.restore_history("adv", second.messages())]
    assert texts == ["first run", "first answer", "second run", "second answer"]


def test_redaction_off_reaches_the_archive() -> None:
    secret = "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx"
    cm = manager()
    cm.add([Message.user(f"use {secret}"), Message.assistant("ok")])
    cm.finish()  # archives the final view
    assert cm.archive.transcript("adv", 1)[0].text == f"use {secret}"


# -- background compaction racing with the agent -------------------------------------------------------------------


class GatedSummarizer:
    """The extractive summarizer, but its first call waits for ``release`` (it signals ``entered`` first)."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            assert self.release.wait(30), "the test never released the summarizer"
        return self.inner.summarize(request)


BUSY_STEPS = 40  # enough tool steps to be over the soft threshold of a 6,000-token window


def busy_manager(summarizer: GatedSummarizer, telemetry: Any = None) -> ContextManager:
    # clear_at_least=0: a background soft compaction is applied whatever it saves.
    cm = manager(window=6_000, summarizer=summarizer, telemetry=telemetry, policy=Policy(clear_at_least=0))
    cm.add([Message.system("rules"), Message.user("go")])
    for i in range(BUSY_STEPS):
        c = call(f"c{i}")
        cm.add([Message.assistant(f"step {i}", [c]), Message.tool(c.id, "data " * 60, meta={"id": f"out{i}"})])
    assert cm.tokens() > cm.budgets.soft
    return cm


def test_background_result_applies_with_what_the_agent_added_meanwhile() -> None:
    gate = GatedSummarizer()
    cm = busy_manager(gate)
    future = cm.compact_in_background()
    assert future is not None
    assert gate.entered.wait(30)
    # The agent goes on while the summary is being written: a whole step, and a look at the view.
    c = call("during")
    cm.add([Message.assistant("meanwhile", [c]), Message.tool(c.id, "fresh output", meta={"id": "fresh"})])
    assert cm.compactions == 0 and not future.done()
    gate.release.set()
    future.result()
    cm.prepare()
    view = cm.messages()
    assert cm.compactions >= 1
    assert_valid(view)
    assert [m.text for m in view[-2:]] == ["meanwhile", "fresh output"]
    history = cm.archive.restore_history("adv", view, keep_meta=("id",))
    ids = {m.meta.get("id") for m in history}
    assert {f"out{i}" for i in range(BUSY_STEPS)} | {"fresh"} <= ids


def test_background_result_dropped_when_the_view_was_rewritten_meanwhile() -> None:
    gate = GatedSummarizer()
    telemetry = RecordingTelemetry()
    cm = busy_manager(gate, telemetry)
    future = cm.compact_in_background()
    assert future is not None
    assert gate.entered.wait(30)
    cm.compact()  # a manual /compact while the background one is still running (its summarizer call is the 2nd)
    after_manual = [m.fingerprint() for m in cm.messages()]
    gate.release.set()
    future.result()
    cm.prepare()
    assert [m.fingerprint() for m in cm.messages()] == after_manual
    assert cm.compactions == 1
    assert any(e.to_dict()["data"].get("code") == "idle_discarded" for e in telemetry.events)
    assert_valid(cm.messages())
