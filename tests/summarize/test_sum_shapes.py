"""Summary strategies shape the extractive summary (004 §3), checked on recorded sessions and golden rubrics."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import TRAJECTORIES, require
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sum_extractive import _message

from contextfold.messages import Message, ToolCall
from contextfold.summarize.base import SummaryRequest
from contextfold.summarize.extractive import ExtractiveSummarizer
from contextfold.summarize.shapes import BRIEF_SHARE, SHAPED_STRATEGIES
from contextfold.tokens import EstimatingCounter

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "summaries"
STRATEGIES = ("task_state", *SHAPED_STRATEGIES)
SUMMARIZER = ExtractiveSummarizer()


def _load(fixture: dict[str, Any]) -> list[Message]:
    path = TRAJECTORIES / fixture["session"]
    require(path.is_file(), f"recorded session not found at {path}")
    data = json.loads(path.read_text())
    items = data[fixture["task_index"]]["traj"] if "task_index" in fixture else data["history"]
    start, end = fixture["slice"]
    return [_message(m) for m in items][start:end]


def _summary(messages: list[Message], strategy: str, max_tokens: int) -> tuple[str, str]:
    result = SUMMARIZER.summarize(SummaryRequest(tuple(messages), strategy=strategy, max_tokens=max_tokens))
    return result.summary, "\n".join(result.retain)


def _fixtures() -> list[Path]:
    return sorted(GOLDEN.glob("*.json"))


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: p.stem)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_golden_rubric_entities_constraints_and_decisions_appear(path: Path, strategy: str) -> None:
    fixture = json.loads(path.read_text())
    summary, retain = _summary(_load(fixture), strategy, fixture["max_tokens"])
    seen = f"{summary}\n{retain}"  # the retain block goes back into the view verbatim, next to the summary
    rubric = fixture["rubric"]
    missing = [item for key in ("entities", "constraints") for item in rubric[key] if item not in seen]
    missing += [item for item in rubric["decisions"][strategy] if item not in seen]
    assert missing == [], f"{path.stem}/{strategy} lacks {missing}:\n{seen}"


@pytest.fixture(scope="module")
def swe_sylow() -> list[Message]:
    return _load(json.loads((GOLDEN / "swe_sympy_sylow.json").read_text()))


@pytest.fixture(scope="module")
def tau_downgrade() -> list[Message]:
    return _load(json.loads((GOLDEN / "tau_airline_downgrade.json").read_text()))


def test_each_strategy_writes_its_own_layout(swe_sylow: list[Message]) -> None:
    texts = {s: _summary(swe_sylow, s, 1000)[0] for s in STRATEGIES}
    assert len(set(texts.values())) == len(STRATEGIES)
    headings = {s: re.findall(r"^## (.+)$", t, re.MULTILINE) for s, t in texts.items()}
    assert headings["task_state"][:2] == ["User requests", "Key entities"]
    assert headings["brief"] == ["Goal", "Key points", "Key entities"]
    assert headings["decision_log"] == ["Task", "Decisions", "Key entities"]
    assert headings["code_delta"] == ["Files changed", "Functions, classes and APIs touched", "Tests and outcomes",
                                      "Commands run", "Files read"]


def test_brief_is_short_bullets_that_cite_their_message(swe_sylow: list[Message]) -> None:
    counter = EstimatingCounter()
    summary, _ = _summary(swe_sylow, "brief", 1000)
    full, _ = _summary(swe_sylow, "task_state", 1000)
    assert counter.count(summary) <= 1000 * BRIEF_SHARE < counter.count(full)
    bullets = [line for line in summary.splitlines() if line.startswith("- ")]
    cited = [b for b in bullets if re.search(r"\[msg \d+(, ref=tout_[0-9a-f]{16})*\]$", b)]
    assert len(bullets) >= 6 and cited == bullets[:-1]  # the entity line is the one bullet without a source
    for bullet in cited:
        number = int(re.search(r"\[msg (\d+)", bullet).group(1))  # type: ignore[union-attr]
        text = bullet[2:bullet.rindex(" [msg")].rstrip("…")
        if text.startswith(("latest request: ", "did: ")):
            continue
        assert " ".join(swe_sylow[number - 1].text.split()).find(text[:60]) >= 0, bullet


def test_decision_log_is_chronological_with_reasons(swe_sylow: list[Message],
                                                     tau_downgrade: list[Message]) -> None:
    for messages in (swe_sylow, tau_downgrade):
        summary, _ = _summary(messages, "decision_log", 1000)
        entries = re.findall(r"^(\d+)\. (.*) \[msg (\d+)\]$", summary, re.MULTILINE)
        assert [int(n) for n, _, _ in entries] == list(range(1, len(entries) + 1))
        cited = [int(m) for _, _, m in entries]
        assert cited == sorted(cited) and len(entries) >= 4
    swe_summary, _ = _summary(swe_sylow, "decision_log", 1000)
    assert ("8. The fix is to collect the indices to remove first, then remove them in reverse order (from highest "
            "to lowest index) — reason: to avoid index shifting issues. [msg 18]") in swe_summary
    tau_summary, _ = _summary(tau_downgrade, "decision_log", 1000)
    acted = re.findall(r"acted: update_reservation_flights\(reservation_id=(\w+)", tau_summary)
    assert acted == ["JG7FMM", "2FBBAH"]  # the two downgrades the agent made, in the order it made them
    assert "get_reservation_details" not in tau_summary  # looking is not deciding


def test_code_delta_lists_files_symbols_tests_and_commands(swe_sylow: list[Message]) -> None:
    summary, _ = _summary(swe_sylow, "code_delta", 1000)
    sections = dict(re.findall(r"^## (.+)\n((?:- .*\n?)+)", summary, re.MULTILINE))
    files = sections["Files changed"]
    # one str_replace, then two diffs (git diff at msg 53, the submitted patch at msg 59)
    assert "- /testbed/sympy/combinatorics/perm_groups.py (3 edits) [msg 59]" in files.splitlines()
    assert "/testbed/reproduce_error.py" in files
    assert sections["Files read"].splitlines() == ["- /testbed", "- /testbed/sympy/combinatorics"]
    assert "combinatorics\n" not in files
    assert "_number_blocks" in sections["Functions, classes and APIs touched"]
    assert "test_sylow_subgroup" in sections["Tests and outcomes"]
    assert "`cd /testbed && python reproduce_error.py`" in sections["Commands run"]


def test_code_delta_without_code_falls_back_to_task_state(tau_downgrade: list[Message]) -> None:
    assert _summary(tau_downgrade, "code_delta", 800) == _summary(tau_downgrade, "task_state", 800)


def test_citation_names_the_cached_output() -> None:
    messages = [
        Message.user("Fix the failing build"),
        Message.assistant("Writing the fix because the old config is wrong.",
                          (ToolCall("c1", "write_file", json.dumps({"path": "src/app.py",
                                                                    "content": "def start():\n    pass\n"})),)),
        Message.tool("c1", "wrote 2 lines", name="write_file", meta={"ref": "tout_0123456789abcdef"}),
    ]
    brief, _ = _summary(messages, "brief", 400)
    assert "[msg 2, ref=tout_0123456789abcdef]" in brief
    delta, _ = _summary(messages, "code_delta", 400)
    assert "- src/app.py [msg 2, ref=tout_0123456789abcdef]" in delta and "- start" in delta
    log, _ = _summary(messages, "decision_log", 400)
    assert "reason: because the old config is wrong." in log


_TEXT = st.text(st.sampled_from("abc def. because since src/x.py def f(): IndexError\n"), max_size=300)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), _TEXT), min_size=1, max_size=12),
       st.sampled_from(SHAPED_STRATEGIES), st.integers(min_value=40, max_value=1500))
def test_every_strategy_stays_within_budget_and_is_deterministic(items: list[tuple[str, str]], strategy: str,
                                                                 budget: int) -> None:
    messages: list[Message] = []
    for n, (role, text) in enumerate(items):
        if role == "tool":
            call = ToolCall(f"c{n}", "edit_file", json.dumps({"path": "src/x.py", "content": text}))
            messages += [Message.assistant(text, (call,)), Message.tool(f"c{n}", text, name="edit_file")]
        else:
            messages.append(Message(role, text))  # type: ignore[arg-type]
    request = SummaryRequest(tuple(messages), strategy=strategy, max_tokens=budget)
    first, second = SUMMARIZER.summarize(request), SUMMARIZER.summarize(request)
    assert first == second
    counter = SUMMARIZER.counter
    assert counter.count(first.summary) + sum(counter.count(f) + 1 for f in first.retain) <= budget
