"""A usage report counts only for the view it was reported on (issue 21 §3).

A new manager over a persisted history (a LangChain checkpoint, a pydantic-ai message history) is fed the old
replies' usage by the adapters; before issue 21 the first one grounded the new view, so that a 9,459-token history
was believed 19,591 and compacted in an emergency.
"""

from __future__ import annotations

from contextfold.manager import ContextManager
from contextfold.messages import Message


def history(turns: int) -> list[Message]:
    out = [Message.system("You are a build engineer.")]
    for n in range(turns):
        out += [Message.user(f"question {n}: " + "why does module {n} fail " * 40),
                Message.assistant(f"answer {n}: " + "the linker cannot find the symbol " * 40)]
    return out


def manager() -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory")


def test_a_report_before_this_manager_prepared_anything_does_not_ground_its_view() -> None:
    counted = manager()
    counted.add(history(12))
    cm = manager()
    cm.record_usage({"input_tokens": 10_000, "output_tokens": 80})  # an old reply of another process's view
    cm.add(history(12))
    assert cm.tokens() == counted.tokens()
    cm.prepare("openai_chat")
    assert cm.compactions == 0  # the history fits: no emergency compaction
    assert cm.usage_total.input == 10_000  # the report still counts as usage


def test_a_report_of_the_prepared_view_grounds_it_and_appends_keep_it() -> None:
    cm = manager()
    cm.add(history(4))
    cm.prepare("openai_chat")
    counted = cm.tokens()
    cm.record_usage({"input_tokens": counted + 300, "output_tokens": 80})
    assert cm.tokens() == counted + 300
    cm.add(Message.assistant("done"))
    assert cm.tokens() > counted + 300


def test_a_report_after_a_rewrite_of_the_view_does_not_ground_it() -> None:
    cm = manager()
    cm.add(history(12))
    cm.prepare("openai_chat")
    sent = cm.tokens()
    cm.compact()  # the view the report is of is gone
    rewritten = cm.tokens()
    assert rewritten < sent
    cm.record_usage({"input_tokens": rewritten + 5_000, "output_tokens": 80})
    assert cm.tokens() == rewritten


def test_a_caller_may_say_the_report_is_of_the_current_view() -> None:
    cm = manager()
    cm.add(history(4))
    counted = cm.tokens()
    cm.record_usage({"input_tokens": counted + 300, "output_tokens": 80}, of_current_view=True)
    assert cm.tokens() == counted + 300
