"""Summary controls of the documents: retain prompt, summary role and header, summarizer from YAML/env (001, 002)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold.compaction import Policy, compact
from contextfold.errors import ConfigError
from contextfold.formats import get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.summarize.base import SummaryRequest
from contextfold.summarize.extractive import ExtractiveSummarizer
from contextfold.summarize.prompts import build_prompt
from contextfold.testing.server import ScriptedLLMServer
from contextfold.tokens import MessageCounter, counter_for_model

COUNTER: MessageCounter = counter_for_model("gpt-4o")


def _history(turns: int = 10) -> list[Message]:
    out = [Message.system("You are a coding agent.")]
    for i in range(turns):
        out += [
            Message.user(f"Step {i}: fix src/module_{i}.py and keep the API stable."),
            Message.assistant(f"Editing src/module_{i}.py because test_{i} fails.",
                              (ToolCall(f"c{i}", "edit_file", f'{{"path": "src/module_{i}.py"}}'),)),
            Message.tool(f"c{i}", f"edited src/module_{i}.py: " + "ok " * 200, name="edit_file"),
        ]
    return out


def _compact(messages: list[Message], policy: Policy, count: int = 0) -> list[Message]:
    return compact(messages, policy=policy, counter=COUNTER, summarizer=ExtractiveSummarizer(),
                   budget=COUNTER.count_messages(messages) // 2, kind="hard", compaction_count=count).messages


def test_system_summary_with_the_documents_header_sits_after_the_pinned_prompt() -> None:
    policy = Policy(summary_role="system", summary_header="[CONTEXT SUMMARY v{version}: {count} messages]",
                    keep_recent_turns=1, keep_tool_io_pairs=1)
    first = _compact(_history(), policy)
    assert [m.role for m in first[:2]] == ["system", "system"]
    summary = first[1]
    assert summary.kind == "summary" and summary.text.startswith("[CONTEXT SUMMARY v1: ")
    get_format("openai_chat").validate(get_format("openai_chat").encode(first))
    second = _compact([*first, *_history(6)[1:]], policy, count=1)
    folded = [m for m in second if m.kind == "summary"]
    assert len(folded) == 1 and folded[0].text.startswith("[CONTEXT SUMMARY v2: ")
    assert folded[0].text.count("[CONTEXT SUMMARY") == 1  # the old header is stripped, not nested


def test_default_summary_stays_a_user_message_with_the_contextfold_header() -> None:
    out = _compact(_history(), Policy(keep_recent_turns=1, keep_tool_io_pairs=1))
    summary = next(m for m in out if m.kind == "summary")
    assert summary.role == "user" and summary.text.startswith("[contextfold summary v1 — ")
    assert "header" not in summary.meta


@pytest.mark.parametrize(("header", "problem"), [("two\nlines", "one line"), ("{nope}", "{version} and {count}")])
def test_bad_headers_are_refused_naming_the_field(header: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        ContextManager("gpt-4o", store="memory", archive="memory", policy={"summary_header": header})
    assert problem in str(err.value) and err.value.field == "policy.summary_header"


def test_retain_prompt_replaces_the_retain_instruction_for_a_model() -> None:
    request = SummaryRequest(tuple(_history(2)), retain_prompt="Keep every file path and the user's API rule.")
    _, user = build_prompt(request, "transcript", max_tokens=500)
    assert ("What to put in <retain> (this replaces the default above):\n"
            "Keep every file path and the user's API rule.") in user


def test_retain_prompt_steers_the_extractive_retain_block() -> None:
    messages = tuple(_history(3)[1:])
    plain = ExtractiveSummarizer().summarize(SummaryRequest(messages))
    steered = ExtractiveSummarizer().summarize(SummaryRequest(messages, retain_prompt="keep the file paths"))
    assert not any(f.startswith("files: ") for f in plain.retain)
    assert "files: src/module_2.py, src/module_1.py, src/module_0.py" in steered.retain  # ranked: latest first


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(counter=COUNTER.counter) as s:
        yield s


def test_summarizer_and_its_model_come_from_the_environment(server: ScriptedLLMServer, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    server.push("<summary>## Goal\nfix the modules</summary>\n<retain>\n- keep the API stable\n</retain>")
    config = tmp_path / "contextfold.yaml"
    config.write_text("policy:\n  strategy: decision_log\n  retain_prompt: keep the API rule\n")
    env = {"CONTEXTFOLD_SUMMARIZER": "openai:gpt-4o-mini"}
    cm = ContextManager.from_config(str(config), env=env, store="memory", archive="memory")
    try:
        assert cm.summarizer.name == "llm:openai:gpt-4o-mini"
        cm.add(_history())
        report = cm.compact()
        assert report.summary is not None and report.summary.summary == "## Goal\nfix the modules"
        body = server.requests[0].body
        assert body["model"] == "gpt-4o-mini"
        prompt = "\n".join(str(m["content"]) for m in body["messages"])
        assert "decision" in prompt.lower() and "keep the API rule" in prompt
    finally:
        cm.close()
