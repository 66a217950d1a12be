"""Prompts per strategy, reply parsing, and the scripted summarizer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message
from contextfold.summarize.base import STRATEGIES, Summarizer, SummaryRequest, SummaryResult
from contextfold.summarize.parse import parse_reply
from contextfold.summarize.prompts import STRATEGY_PROMPTS, build_prompt
from contextfold.testing.summarizer import ScriptedSummarizer

REQ = SummaryRequest((Message.user("hi"),))


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "custom"])
def test_every_strategy_has_its_prompt_and_the_shared_rules(strategy: str) -> None:
    system, user = build_prompt(SummaryRequest((), strategy=strategy), "TRANSCRIPT", max_tokens=321)
    assert "Never invent" in system and "<retain>" in system
    assert STRATEGY_PROMPTS[strategy] in user
    assert "under 321 tokens" in user
    assert user.index("<history>\nTRANSCRIPT\n</history>") > user.index(STRATEGY_PROMPTS[strategy])


def test_task_state_asks_for_every_section() -> None:
    _, user = build_prompt(REQ, "", max_tokens=100)
    for section in ("## Goal", "success criteria", "## Constraints", "## Key entities", "file paths", "branches",
                    "environments", "## Decisions", "rationale", "## Progress", "## Blockers", "## Next steps"):
        assert section in user


def test_directives_instructions_and_previous_summary_are_appended() -> None:
    request = SummaryRequest((), summary_directives=("mention the branch",), retain_directives=("the API key name",),
                             instructions="keep the failing test names", previous_summary="OLD SUMMARY")
    _, user = build_prompt(request, "T", max_tokens=100)
    assert "The summary must also:\n- mention the branch" in user
    assert "Also put in <retain>, word for word:\n- the API key name" in user
    assert "Instructions from the user for this summary:\n- keep the failing test names" in user
    assert "<previous_summary>\nOLD SUMMARY\n</previous_summary>" in user
    assert "do not nest" in user


def test_custom_prompt_replaces_the_strategy() -> None:
    _, user = build_prompt(SummaryRequest((), strategy="custom", custom_prompt="Write a haiku."), "T",
                           max_tokens=50)
    assert user.startswith("Write a haiku.")
    assert all(p not in user for p in STRATEGY_PROMPTS.values())


@pytest.mark.parametrize(
    ("reply", "summary", "retain"),
    [
        ("<summary>S</summary><retain>- a\n* b\n1. c\n\n- a</retain>", "S", ("a", "b", "c")),
        ("Thinking...\n<summary>\n S \n</summary>", "S", ()),
        ("just text", "just text", ()),
        ("<retain>- keep</retain>\nplain summary", "plain summary", ("keep",)),
        ("<summary>cut off in the midd", "cut off in the midd", ()),
        ("<summary>S<retain>- x", "S", ("x",)),
        ("<SUMMARY>S</SUMMARY>", "S", ()),
    ],
)
def test_parse_reply(reply: str, summary: str, retain: tuple[str, ...]) -> None:
    parsed = parse_reply(reply)
    assert (parsed.summary, parsed.retain) == (summary, retain)


@settings(max_examples=100, deadline=None)
@given(st.text().filter(lambda t: "<" not in t), st.lists(st.text(alphabet="abc xyz", min_size=1).map(str.strip)
                                                          .filter(bool), max_size=5))
def test_parse_round_trip(summary: str, facts: list[str]) -> None:
    reply = f"<summary>{summary}</summary>\n<retain>\n" + "\n".join(f"- {f}" for f in facts) + "\n</retain>"
    parsed = parse_reply(reply)
    assert parsed.summary == summary.strip()
    assert parsed.retain == tuple(dict.fromkeys(facts))


def test_scripted_summarizer_follows_its_script_and_records() -> None:
    failure = RuntimeError("boom")
    scripted = ScriptedSummarizer(["<summary>one</summary><retain>- f</retain>",
                                   SummaryResult("two", summarizer="x"), failure])
    assert isinstance(scripted, Summarizer)
    assert scripted.summarize(REQ) == SummaryResult("one", ("f",), summarizer="scripted")
    assert scripted.summarize(REQ).summary == "two"
    with pytest.raises(RuntimeError, match="boom"):
        scripted.summarize(REQ)
    assert scripted.summarize(REQ).summary == "Summary of 1 messages."
    assert len(scripted.requests) == 4


def test_scripted_summarizer_handler_and_strict_mode() -> None:
    scripted = ScriptedSummarizer(handler=lambda r: f"covered {len(r.messages)}")
    assert scripted.summarize(REQ).summary == "covered 1"
    strict = ScriptedSummarizer(default=None)
    with pytest.raises(LookupError, match="no scripted summary left"):
        strict.summarize(REQ)


def test_scripted_summarizer_is_reachable_from_summarize() -> None:
    from contextfold.testing.summarizer import ScriptedSummarizer as Again

    assert Again is ScriptedSummarizer


def test_requests_staying_verbatim_are_named_so_the_model_does_not_copy_them() -> None:
    _, plain = build_prompt(SummaryRequest((Message.user("Fix it."),)), "T", max_tokens=100)
    assert "word for word next to your summary" not in plain
    _, told = build_prompt(SummaryRequest((Message.user("Fix it."),), verbatim=("Fix it.",)), "T", max_tokens=100)
    assert "1 user message of this history stays in the context word for word next to your summary" in told
