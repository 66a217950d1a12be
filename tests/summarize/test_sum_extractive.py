"""The extractive summarizer on real recorded sessions and on generated histories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import TRAJECTORIES, require
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import ConfigError, InvalidHistory
from contextfold.messages import Message, ToolCall
from contextfold.summarize.base import SummaryRequest
from contextfold.summarize.digest import _TEXT_CALL, _TEXT_PARAM
from contextfold.summarize.entities import extract_entities
from contextfold.summarize.extractive import ExtractiveSummarizer
from contextfold.tokens import EstimatingCounter

TAU = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"
SWE = sorted((TRAJECTORIES / "sweagent-lm32b").glob("*.traj"))[:4] + sorted(
    (TRAJECTORIES / "sweagent-claude4sonnet").glob("*.traj"))[:2]
SUMMARIZER = ExtractiveSummarizer()


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))


def _message(item: dict[str, Any]) -> Message:
    calls = tuple(ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                  for c in item.get("tool_calls") or [])
    call_id = item.get("tool_call_id") or (item.get("tool_call_ids") or [None])[0]
    return Message(item["role"], _text(item.get("content")), calls, tool_call_id=call_id, name=item.get("name"))


def tau_sessions(count: int) -> list[tuple[list[Message], str]]:
    require(TAU.is_file(), f"tau-bench data not found at {TAU}")
    data = json.loads(TAU.read_text())
    return [([_message(m) for m in task["traj"]], task["info"]["task"]["instruction"]) for task in data[:count]]


def swe_session(path: Path) -> list[Message]:
    require(path.is_file(), f"SWE-agent data not found at {path}")
    return [_message(m) for m in json.loads(path.read_text())["history"]]


def within(result: Any, budget: int, counter: Any) -> bool:
    return counter.count(result.summary) + sum(counter.count(f) + 1 for f in result.retain) <= budget


# -- real sessions -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [300, 1_000, 2_000])
def test_tau_bench_within_budget_deterministic_and_keeps_user_constraints(budget: int) -> None:
    for messages, _instruction in tau_sessions(25):
        request = SummaryRequest(tuple(messages[1:]), max_tokens=budget)
        first, second = SUMMARIZER.summarize(request), SUMMARIZER.summarize(request)
        assert first == second
        assert within(first, budget, SUMMARIZER.counter)
        kept = first.summary + "\n" + "\n".join(first.retain)
        users = [m.text.strip() for m in messages[1:] if m.role == "user"]
        verbatim = sum(text in kept for text in users)
        if budget >= 2_000:
            assert verbatim == len(users)  # every user request survives verbatim at a normal budget
        elif budget >= 1_000:
            assert verbatim >= 0.9 * len(users)
        assert users[0][:40] in kept  # the opening request (the task) always leads


def test_tau_bench_constraints_go_to_retain() -> None:
    messages, _ = tau_sessions(1)[0]
    result = SUMMARIZER.summarize(SummaryRequest(tuple(messages[1:]), max_tokens=1_000))
    assert "Neither of those options works for me as I don't want to fly before 11 AM EST." in result.retain
    assert "No, I do not want travel insurance." in result.retain
    for entity in ("mia_li_3668", "HAT136", "JFK", "credit_card_4421486"):
        assert entity in result.summary


@pytest.mark.parametrize("path", SWE, ids=lambda p: p.stem)
def test_swe_sessions_list_the_paths_the_agent_acted_on(path: Path) -> None:
    messages = swe_session(path)
    cut = len(messages) * 2 // 3
    part = tuple(messages[1:cut])
    result = SUMMARIZER.summarize(SummaryRequest(part, max_tokens=2_000))
    assert within(result, 2_000, SUMMARIZER.counter)
    assert result == SUMMARIZER.summarize(SummaryRequest(part, max_tokens=2_000))
    acted: set[str] = set()
    for m in part:
        args = " ".join(c.arguments for c in m.tool_calls)
        args += " ".join(p.group(2) for call in _TEXT_CALL.finditer(m.text) for p in _TEXT_PARAM.finditer(call.group(2))
                         if p.group(1) == "path")
        acted |= {e for e in extract_entities(args) if e.startswith("/")}
    assert acted
    missing = {p for p in acted if p not in result.summary}
    assert len(missing) <= len(acted) // 10, missing
    assert "## Key entities" in result.summary and "files: " in result.summary


def test_swe_observations_are_not_user_requests() -> None:
    messages = swe_session(SWE[0])
    result = SUMMARIZER.summarize(SummaryRequest(tuple(messages[1:20]), max_tokens=2_000))
    requests = result.summary.split("## User requests", 1)[1].split("## ", 1)[0]
    assert "OBSERVATION:" not in requests


# -- folding, directives, kinds ----------------------------------------------------------------------------------


def test_previous_summary_is_folded_not_nested() -> None:
    messages, _ = tau_sessions(1)[0]
    first = SUMMARIZER.summarize(SummaryRequest(tuple(messages[1:12]), max_tokens=800))
    second = SUMMARIZER.summarize(SummaryRequest(tuple(messages[12:]), previous_summary=first.summary,
                                                 max_tokens=800))
    assert second.summary.count("## Key entities") == 1
    assert second.summary.count("Extractive summary of") == 1
    assert "mia_li_3668" in second.summary  # named only in the first part
    assert "Hi! I'm looking to book a flight from New York to Seattle on May 20th." in second.summary


def test_a_multi_line_request_of_an_earlier_summary_comes_back_whole_and_once() -> None:
    task = "Fix the parser.\n\nSteps:\n1. read src/parse.py\n2. run the tests"
    first = SUMMARIZER.summarize(SummaryRequest((Message.user(task), Message.assistant("Reading it.")),
                                                max_tokens=400))
    assert f"- {task}" in first.summary
    # The same request still in the part summarized (the user block keeps it verbatim): listed once, whole.
    second = SUMMARIZER.summarize(SummaryRequest((Message.user(task), Message.assistant("Fixed.")),
                                                 previous_summary=first.summary, max_tokens=400))
    requests = second.summary.split("## User requests", 1)[1].split("## ", 1)[0]
    assert requests.strip() == f"- {task}"


def test_requests_that_stay_in_the_view_are_not_repeated() -> None:
    task = "Fix the parser in src/parse.py. Never touch tests/test_parse.py.\n\nSteps:\n1. read it\n2. fix it"
    follow_up = "Also keep the public API of parse_line stable."
    slice_ = (Message.user(task), Message.assistant("Reading src/parse.py."), Message.user(follow_up),
              Message.assistant("Done."))
    # Both requests stay in the view word for word: the summary lists neither, and the constraint sentence of the
    # task is not copied into the retained facts either.
    both = SUMMARIZER.summarize(SummaryRequest(slice_, max_tokens=400, verbatim=(task, follow_up)))
    assert "## User requests" not in both.summary
    assert not any("Never touch" in fact for fact in both.retain)
    assert "src/parse.py" in both.summary  # what the requests name is still among the entities
    # Only the task stays: the follow-up is listed, whole and once.
    one = SUMMARIZER.summarize(SummaryRequest(slice_, max_tokens=400, verbatim=(task,)))
    requests = one.summary.split("## User requests", 1)[1].split("## ", 1)[0]
    assert requests.strip() == f"- {follow_up}"
    # A request is in the view only as a whole message: a kept message that merely contains it does not count.
    short = (Message.user("yes"), Message.assistant("Doing it."), Message.user("yes, and log it"))
    partial = SUMMARIZER.summarize(SummaryRequest(short, max_tokens=400, verbatim=("yes, and log it",)))
    requests = partial.summary.split("## User requests", 1)[1].split("## ", 1)[0]
    assert requests.strip() == "- yes"


def test_a_request_an_earlier_summary_cut_is_recognised_in_the_view() -> None:
    task = "Investigate the flaky upload test. " + "The log shows retries and timeouts. " * 80 + "Report back."
    first = SUMMARIZER.summarize(SummaryRequest((Message.user(task), Message.assistant("Looking.")),
                                                max_tokens=200))
    assert "[…]" in first.summary  # the request did not fit whole: head […] tail
    later = (Message.user("Any news?"), Message.assistant("Still looking."))
    again = SUMMARIZER.summarize(SummaryRequest(later, previous_summary=first.summary, max_tokens=400,
                                                verbatim=(task,)))
    requests = again.summary.split("## User requests", 1)[1].split("## ", 1)[0]
    assert requests.strip() == "- Any news?"
    # Without the task in the view, the cut copy is what the summary still has of it: it stays.
    kept = SUMMARIZER.summarize(SummaryRequest(later, previous_summary=first.summary, max_tokens=400))
    assert "Investigate the flaky upload test." in kept.summary


def test_contextfold_notes_are_not_entities_of_an_output() -> None:
    output = ("   12\tdef parse(text):\n[... lines 13-90 of 120 omitted; read them with "
              'tool_output_cache(ref_id="tout_0123456789abcdef", offset=13) …812 tokens truncated… ...]\n'
              "[tool output cached as ref=tout_0123456789abcdef: 120 lines, 4,000 bytes in full. Read any part with "
              'tool_output_cache(ref_id="tout_0123456789abcdef", offset=<line>, limit=<lines>); search it with '
              'tool_output_cache_grep(pattern=<regex>, ref_id="tout_0123456789abcdef").]')
    result = SUMMARIZER.summarize(SummaryRequest((Message.user("go"), Message.tool("c", output)), max_tokens=300))
    assert "tout_0123456789abcdef" not in result.summary and "tool_output_cache_grep" not in result.summary


def test_bare_numbers_of_outputs_are_kept_as_numbers() -> None:
    output = '{"flight_number": "HAT227", "price": 1121, "seats": 9}'
    result = SUMMARIZER.summarize(SummaryRequest((Message.user("cheapest?"), Message.tool("c", output)),
                                                 max_tokens=300))
    assert "numbers: 1121" in result.summary


def test_summary_messages_inside_the_slice_are_folded() -> None:
    old = Message.assistant("## Key entities\nfiles: /srv/app/legacy_module.py", meta={"kind": "summary"})
    result = SUMMARIZER.summarize(SummaryRequest((old, Message.user("continue please")), max_tokens=300))
    assert "/srv/app/legacy_module.py" in result.summary
    assert result.summary.count("## Key entities") == 1


def test_retain_directive_keeps_the_named_kind() -> None:
    history = (
        Message.user("Make the suite green."),
        Message.tool("c1", "FAILED tests/test_a.py::test_alpha - AssertionError\nFAILED tests/test_b.py::test_beta"),
    )
    result = SUMMARIZER.summarize(SummaryRequest(history, retain_directives=("keep the failing test names",)))
    assert any(f.startswith("tests: ") and "tests/test_a.py::test_alpha" in f for f in result.retain)


def test_retain_messages_are_carried_forward() -> None:
    history = (Message.user("- deploy only to staging", meta={"kind": "retain"}), Message.user("go"))
    assert "deploy only to staging" in SUMMARIZER.summarize(SummaryRequest(history)).retain


def test_invalid_requests_name_the_field() -> None:
    with pytest.raises(ConfigError, match="max_tokens"):
        SUMMARIZER.summarize(SummaryRequest((), max_tokens=0))
    with pytest.raises(ConfigError, match="unknown strategy 'poem'") as info:
        SUMMARIZER.summarize(SummaryRequest((), strategy="poem"))
    assert info.value.field == "strategy"
    with pytest.raises(ConfigError, match="custom_prompt"):
        SUMMARIZER.summarize(SummaryRequest((), strategy="custom"))
    with pytest.raises(InvalidHistory, match="message 1"):
        SUMMARIZER.summarize(SummaryRequest((Message.user("a"), {"role": "user"})))  # type: ignore[arg-type]
    for verbatim in ("Fix it.", ("Fix it.", Message.user("Fix it."))):
        with pytest.raises(ConfigError, match="message texts") as bad:
            SUMMARIZER.summarize(SummaryRequest((Message.user("Fix it."),), verbatim=verbatim))  # type: ignore[arg-type]
        assert bad.value.field == "verbatim"


# -- properties --------------------------------------------------------------------------------------------------

words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)
paths = st.from_regex(r"/[a-z]{1,8}(/[a-z_]{1,8}){0,3}\.py", fullmatch=True)


@st.composite
def histories(draw: st.DrawFn) -> tuple[Message, ...]:
    out: list[Message] = []
    for i in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "tool"]))
        text = draw(words) + " " + draw(paths)
        if kind == "call":
            out.append(Message.assistant(text, [ToolCall(f"c{i}", "edit", json.dumps({"path": draw(paths)}))]))
        elif kind == "tool":
            out.append(Message.tool(f"c{i}", text * draw(st.integers(1, 20))))
        else:
            out.append(Message(kind, text))
    return tuple(out)


@settings(max_examples=60, deadline=None)
@given(histories(), st.integers(1, 600))
def test_always_within_budget_and_deterministic(history: tuple[Message, ...], budget: int) -> None:
    counter = EstimatingCounter()
    summarizer = ExtractiveSummarizer(counter=counter)
    request = SummaryRequest(history, max_tokens=budget)
    result = summarizer.summarize(request)
    assert within(result, budget, counter)
    assert result == summarizer.summarize(request)
    assert result.summarizer == "extractive" and not result.fell_back


def test_a_very_long_slice_is_read_at_its_ends_and_says_so() -> None:
    # Issue 12: a 100,000-message emergency compaction spent 4.5 s reading every message for a summary of a few
    # thousand tokens. Past MAX_READ_MESSAGES the start (the task) and the newest messages are read; the summary
    # says how many in the middle were not (they are in the archive).
    from contextfold.summarize.digest import MAX_READ_MESSAGES, READ_HEAD_MESSAGES

    total = MAX_READ_MESSAGES + 2_000
    messages = [Message.user("Fix the crash in src/first_task.py")]
    messages += [Message.assistant(f"looking at src/middle_{i}.py") for i in range(1, total - 1)]
    messages.append(Message.assistant("the bug is in src/latest_module.py"))
    summary = ExtractiveSummarizer().summarize(SummaryRequest(tuple(messages), max_tokens=600)).summary
    assert summary.startswith(f"Extractive summary of {total} earlier messages. The 2,000 in the middle were not read")
    assert "src/first_task.py" in summary and "src/latest_module.py" in summary
    middle = READ_HEAD_MESSAGES + 1_000
    assert f"src/middle_{middle}.py" not in summary


def test_a_slice_at_the_read_limit_is_read_whole() -> None:
    from contextfold.summarize.digest import MAX_READ_MESSAGES, digest_messages

    messages = [Message.assistant(f"see src/m_{i}.py") for i in range(MAX_READ_MESSAGES)]
    digest = digest_messages(messages)
    assert digest.unread == 0
    assert f"src/m_{MAX_READ_MESSAGES // 2}.py" in digest.entities


def test_a_slice_of_1500_messages_is_read_at_its_first_200_and_newest_800() -> None:
    # Issue 22 (eleventh session): a long slice's newest 2,800 messages were a third of adding and first compacting
    # 100,000 recorded messages; a summary of ~2,000 tokens is written from the first 200 and the newest 800.
    from contextfold.summarize.digest import digest_messages

    messages = [Message.assistant(f"see src/n7q_{i}.py") for i in range(1_500)]
    digest = digest_messages(messages)
    assert digest.unread == 500
    assert "src/n7q_199.py" in digest.entities and "src/n7q_700.py" in digest.entities
    assert "src/n7q_200.py" not in digest.entities and "src/n7q_699.py" not in digest.entities


class _CountingCounter(EstimatingCounter):
    """Counts like an EstimatingCounter, and says how many distinct texts it was asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def count(self, text: str) -> int:
        self.asked.add(text)
        return super().count(text)


def test_a_full_entity_section_stops_counting_the_entities_left() -> None:
    # 5,000 distinct names, a budget of a few dozen: once the section is full, the rest is not counted (issue 22:
    # a cold compaction of a 1.6M-token history counted all of its ~13,000 entities, a quarter of its time).
    names = " ".join(f"module_{i}.attr_{i}" for i in range(5_000))
    counter = _CountingCounter()
    request = SummaryRequest((Message.user("Fix the parser."), Message.tool("c1", names, name="bash")),
                             max_tokens=400)
    result = ExtractiveSummarizer(counter=counter).summarize(request)
    assert "## Key entities" in result.summary
    asked = [text for text in counter.asked if "attr_" in text and len(text) < 20]
    assert len(asked) < 200, len(asked)
    assert result.output_tokens is not None and result.output_tokens <= 400
