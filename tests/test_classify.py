"""Classification: instructions, reasoning, facts and mixed messages, deterministic."""

from __future__ import annotations

import pytest

from contextfold.compaction import Category, classify, classify_all, reduction_rank
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCall

try:  # tests/ as a package (tests/__init__.py) or as a plain folder on sys.path
    from tests.conftest import TRAJECTORIES, require
except ImportError:
    from conftest import TRAJECTORIES, require  # type: ignore[no-redef]

LOG = "\n".join(f"{i}: ERROR worker-{i} failed at step {i * 7}" for i in range(200))
TRACEBACK = 'Traceback (most recent call last):\n' + '  File "app/main.py", line 3, in <module>\n' * 120


@pytest.mark.parametrize(
    ("message", "category"),
    [
        (Message.system("You are a helpful airline agent."), Category.INSTRUCTION),
        (Message("developer", "Answer in JSON."), Category.INSTRUCTION),
        (Message.user("Please fix the failing test in tests/test_api.py"), Category.INSTRUCTION),
        (Message.user("You must not change the public API. Only touch src/."), Category.INSTRUCTION),
        (Message.user("hi, I want to change my flight"), Category.INSTRUCTION),
        (Message.user(LOG), Category.FACT),
        (Message.user("Please fix this crash:\n" + TRACEBACK), Category.MIXED),
        (Message.user("OBSERVATION:\nfile listing"), Category.FACT),
        (Message.tool("c1", "anything at all"), Category.FACT),
        (Message.assistant("Let me look at the failing test first."), Category.REASONING),
        (Message.assistant("", [ToolCall("c1", "bash", '{"cmd": "ls"}')]), Category.MIXED),
        (Message.assistant("Listing first.", [ToolCall("c1", "bash", '{"cmd": "ls"}')]), Category.MIXED),
        (Message.assistant("Let me list.\n<function=bash>\n<parameter=command>ls</parameter>\n</function>"),
         Category.MIXED),
        (Message("assistant", (ThinkingPart("the bug is in parse()"), TextPart("ok"))), Category.REASONING),
        (Message.assistant("```\n" + LOG + "\n```"), Category.FACT),
        (Message.assistant("I think the cause is this:\n```\n" + LOG + "\n```"), Category.MIXED),
        (Message.user("[contextfold summary v1]", meta={"kind": "summary"}), Category.MIXED),
        (Message.tool("c1", "[masked]", meta={"kind": "masked"}), Category.FACT),
        (Message.user("[earlier conversation compacted]", meta={"kind": "placeholder"}), Category.FACT),
    ],
)
def test_classify(message: Message, category: Category) -> None:
    assert classify(message) is category


def test_reduction_order_facts_first() -> None:
    ranks = [reduction_rank(c) for c in (Category.FACT, Category.MIXED, Category.REASONING, Category.INSTRUCTION)]
    assert ranks == sorted(ranks) and len(set(ranks)) == 4


def test_real_sessions_are_classified_deterministically() -> None:
    require(TRAJECTORIES.is_dir(), f"shared data not found at {TRAJECTORIES}")
    from contextfold.importers._files import load_session

    files = sorted((TRAJECTORIES / "sweagent-claude4sonnet").glob("*.traj"))[:2]
    for path in files:
        session = load_session(path)
        cats = classify_all(session.messages)
        assert cats == classify_all(session.messages)
        for m, c in zip(session.messages, cats, strict=True):
            if m.role == "tool":
                assert c is Category.FACT
            if m.role == "system":
                assert c is Category.INSTRUCTION
        # the task statement is the first user message: an instruction (possibly with pasted data)
        first_user = next(c for m, c in zip(session.messages, cats, strict=True) if m.role == "user")
        assert first_user in (Category.INSTRUCTION, Category.MIXED)
