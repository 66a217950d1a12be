"""compact_context: the agent compacts its own context as /compact does; its arguments are untrusted."""

from __future__ import annotations

import json

import pytest

from contextfold.formats.tool_schemas import SCHEMA_FORMATS
from contextfold.integrations._retrieval import answer, tool_specs
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.steering import COMPACT_CONTEXT_TOOL, MAX_INSTRUCTION_CHARS, compact_context_schema
from contextfold.telemetry import RecordingTelemetry

FACT = "deploy.primary_host = db-replica-3.internal"


def session(session_id: str = "ct", pages: int = 8) -> ContextManager:
    """A deploy config read first (with the fact in it), then build-log pages: the config is old enough to go."""
    cm = ContextManager("gpt-4o", store="memory", archive="memory", session_id=session_id,
                        telemetry=RecordingTelemetry())
    config = "\n".join([*(f"deploy.step_{i} = run migration {i}" for i in range(20)), FACT,
                        *(f"deploy.region_{i} = eu-{i}" for i in range(20))])
    messages = [Message.user("Prepare the deploy."),
                Message.assistant("reading", (ToolCall("c0", "read_config", "{}"),)), Message.tool("c0", config)]
    for p in range(1, pages + 1):
        log = "\n".join(f"line {i}: compiling module_{p}_{i} ... ok" for i in range(80))
        messages += [Message.assistant(f"page {p}", (ToolCall(f"c{p}", "read_log", json.dumps({"page": p})),)),
                     Message.tool(f"c{p}", f"build log page {p}\n{log}")]
    cm.add(messages)
    return cm


def test_the_schema_in_every_format_and_next_to_the_retrieval_tools() -> None:
    for fmt in SCHEMA_FORMATS:
        schema = compact_context_schema(fmt)
        assert json.dumps(schema).count(COMPACT_CONTEXT_TOOL) == 1
    assert [s.name for s in tool_specs()] == ["tool_output_cache", "tool_output_cache_grep", "history_search"]
    assert [s.name for s in tool_specs(compact=True)][-1] == COMPACT_CONTEXT_TOOL


def test_it_runs_the_compaction_of_slash_compact_and_says_what_was_kept() -> None:
    cm = session()
    cm.steering.offer({"history_search", "compact_context"})
    text = answer(cm, COMPACT_CONTEXT_TOOL, {"instructions": "keep the deploy steps"}, "cc")
    assert cm.compactions == 1
    view = cm.messages()
    assert FACT not in "\n".join(m.text for m in view)
    head, kept, where = text.split("\n")
    assert head.startswith("compact_context: ") and " earlier messages summarized; context " in head
    assert kept.startswith("Kept verbatim: ") and "recent message" in kept
    assert kept.endswith("The summarizer was asked to keep: keep the deploy steps")
    assert where == "The full earlier history is archived: history_search finds exact lines in it (a regular " \
                    "expression)."
    # ... and the compacted fact is one history_search away.
    found = answer(cm, "history_search", {"pattern": "primary_host"}, "hs")
    assert FACT in found
    # Both ran the way a manual /compact does: the same report and events.
    assert cm.steering.since.summarized > 0


def test_untrusted_arguments_come_back_as_results_never_exceptions() -> None:
    cm = session("ct-bad")
    bad = {
        "[" * 60_000: "nested too deeply",
        '"keep it"': "must be a JSON object",
        '{"instructions": 42}': "instructions must be a string, got int",
        '{"keep": "x"}': "does not take keep; it takes instructions",
        json.dumps({"instructions": "k" * (MAX_INSTRUCTION_CHARS + 1)}): "keep them under 2,000",
        "x" * 70_000: "keep them under 65,536",
        "{not json": "not valid JSON",
    }
    for arguments, message in bad.items():
        text = answer(cm, COMPACT_CONTEXT_TOOL, arguments)
        assert text.startswith("error: ") and message in text, (arguments[:30], text)
    assert cm.compactions == 0


def test_a_second_call_right_after_a_compaction_is_declined() -> None:
    cm = session("ct-twice")
    answer(cm, COMPACT_CONTEXT_TOOL, "{}")
    assert cm.compactions == 1
    cm.add([Message.assistant("", (ToolCall("x1", COMPACT_CONTEXT_TOOL, "{}"),))])
    again = answer(cm, COMPACT_CONTEXT_TOOL, "{}", "x1")
    assert again == "compact_context: declined: the context was compacted 1 messages ago; there is nothing new to " \
                    "summarize yet."
    assert cm.compactions == 1


def test_nothing_to_compact_and_a_failing_compaction_are_told() -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", session_id="ct-small")
    cm.add([Message.user("hi")])
    assert answer(cm, COMPACT_CONTEXT_TOOL, "{}").startswith("compact_context: nothing to compact: ")

    class Broken:
        def compact(self, *, force: bool = True, instructions: str | None = None, kind: str = "hard") -> object:
            from contextfold.errors import SummarizerError

            raise SummarizerError("summary model down")

    from contextfold.steering import run_compact_context

    text = run_compact_context(Broken(), ToolCall("z", COMPACT_CONTEXT_TOOL, "{}"), tools=())
    assert text == "compact_context: compaction failed (SummarizerError: summary model down); the context is " \
                   "unchanged."


@pytest.mark.parametrize("arguments", ["{}", '{"instructions": null}', '{"instructions": "   "}'])
def test_no_instructions_is_fine(arguments: str) -> None:
    cm = session(f"ct-none-{len(arguments)}")
    text = answer(cm, COMPACT_CONTEXT_TOOL, arguments)
    assert "summarized" in text and "asked to keep" not in text
