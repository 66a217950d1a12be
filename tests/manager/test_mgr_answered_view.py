"""The answered output is shown wider (whole when it fits) for the call that answers it, then cut back."""

from __future__ import annotations

from contextfold import ContextManager
from contextfold.manager._answered_view import WIDENED_META
from contextfold.messages import Message, ToolCall

# 600 numbered lines of a file view: about 9,000 tokens, cut at write time to ~1,700 in a 16K window.
LISTING = "\n".join(f"{n:6d}\t    value_{n} = compute({n}, offset={n * 7})" for n in range(1, 601))


def manager(window: int = 16_000, **policy: object) -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive=False,
                          message_id_prefix="t", policy=policy or None)


def turn(cm: ContextManager, n: int, output: str) -> None:
    cm.add([Message.assistant(f"step {n}", [ToolCall(f"c{n}", "view", '{"path": "a.py"}')]),
            Message.tool(f"c{n}", output)])


def output_of(cm: ContextManager, call_id: str) -> Message:
    return next(m for m in cm.messages() if m.role == "tool" and m.tool_call_id == call_id)


def test_the_answered_output_is_wider_for_its_call_and_back_to_its_write_time_view_after() -> None:
    cm = manager()
    cm.add([Message.system("You are a coding agent."), Message.user("fix a.py")])
    turn(cm, 1, LISTING)
    written = output_of(cm, "c1")  # the write-time view, before any prepare()
    assert written.kind == "truncated" and "line 300" not in written.text
    cm.prepare()
    shown = output_of(cm, "c1")
    assert shown.meta.get(WIDENED_META) is True
    # Twice the write-time cap by default: more of the head and the tail than the written view shows.
    assert cm.counter.count_message(shown) > 1.5 * cm.counter.count_message(written)
    assert "    80\t    value_80 = compute(80, offset=560)" in shown.text
    assert "    80\t    value_80 = compute(80, offset=560)" not in written.text
    assert cm.tokens() <= cm.budgets.hard  # widened within the room under the hard threshold
    # The agent answers and calls again: the first output is back to exactly its write-time view.
    turn(cm, 2, "ok")
    assert output_of(cm, "c1") == written
    cm.prepare()
    assert output_of(cm, "c1") == written


def test_an_output_that_fits_is_shown_whole_while_answered() -> None:
    cm = manager(window=128_000)
    cm.add([Message.system("s"), Message.user("fix a.py")])
    small = LISTING  # ~9,000 tokens: over the write-time cap at 128K (6,666), under twice that (13,332)
    turn(cm, 1, small)
    assert output_of(cm, "c1").kind == "truncated"
    cm.prepare()
    assert output_of(cm, "c1").text == small
    cm.add(Message.assistant("done"))
    assert output_of(cm, "c1").text != small


def test_preparing_twice_decides_on_the_write_time_view_and_widens_again() -> None:
    cm = manager()
    cm.add([Message.system("s"), Message.user("fix a.py")])
    turn(cm, 1, LISTING)
    cm.prepare()
    first = output_of(cm, "c1")
    cm.prepare()
    assert output_of(cm, "c1") == first
    assert cm.compactions == 0 and cm.maskings == 0


def test_widening_off_keeps_the_write_time_view() -> None:
    cm = manager(answered_output_tokens=0)
    cm.add([Message.system("s"), Message.user("fix a.py")])
    turn(cm, 1, LISTING)
    written = output_of(cm, "c1")
    cm.prepare()
    assert output_of(cm, "c1") == written


def test_a_limit_caps_the_wider_view() -> None:
    cm = manager(answered_output_tokens=3_000)
    cm.add([Message.system("s"), Message.user("fix a.py")])
    turn(cm, 1, LISTING)
    cm.prepare()
    shown = output_of(cm, "c1")
    assert shown.meta.get(WIDENED_META) is True
    assert 2_000 < cm.counter.count_message(shown) <= 3_000
