"""The read-ahead releases the outputs a masking may take by the next turn with the next held ones (``BUILT_TOGETHER``):
never one later than releasing each alone, each once, oldest first, and at most ``BUILT_TOGETHER - 1`` early ones
at a time (issue 22: a placeholder built alone in a turn's job costs about twice one built after another).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.manager import _read_ahead
from contextfold.manager._read_ahead import HeldOutputs
from contextfold.messages import Message

_DIGEST_TOKENS = 3


def _count(m: Message) -> int:
    return len(m.text)  # (the placeholder's shape is long: only the long outputs below are maskable)


def _batches(shape: list[list[bool]]) -> list[list[Message]]:
    """Each turn's tool results, long (maskable) or short, numbered across the session."""
    out: list[list[Message]] = []
    n = 0
    for turn in shape:
        batch = []
        for long in turn:
            n += 1
            batch.append(Message.tool(f"c{n}", f"output {n} " + ("x" * 400 if long else ""), name="bash"))
        out.append(batch)
    return out


def _alone(batches: list[list[Message]], keep: int) -> list[list[int]]:
    """What releasing each output alone gives (the rule before BUILT_TOGETHER): ids released per turn."""
    shape = len(Message.tool("c", "[tool output trimmed; ref=tout_0000000000000000]", name="bash").text)
    held: list[tuple[int, Message]] = []
    results = 0
    released: list[list[int]] = []
    for batch in batches:
        for m in batch:
            results += 1
            if _count(m) > shape + _DIGEST_TOKENS:
                held.append((results, m))
        newest_kept = results - max(0, keep - 1)
        ready = [m for number, m in held if number <= newest_kept]
        held = [(number, m) for number, m in held if number > newest_kept]
        released.append([id(m) for m in ready])
    return released


@settings(max_examples=200, deadline=None)
@given(shape=st.lists(st.lists(st.booleans(), max_size=3), max_size=25), keep=st.integers(0, 5))
def test_outputs_are_released_never_later_each_once_and_few_early(shape: list[list[bool]], keep: int) -> None:
    batches = _batches(shape)
    alone = _alone(batches, keep)
    held = HeldOutputs()
    released: list[int] = []
    due: list[int] = []
    for batch, due_now in zip(batches, alone, strict=True):
        got = held.release(batch, keep, _count, _DIGEST_TOKENS)
        released += [id(m) for m, _ in got]
        due += due_now
        # Every output a masking may take by the next turn is released by now (none later than alone)...
        assert set(due) <= set(released)
        # ... in the order they arrived, each once, and at most BUILT_TOGETHER - 1 of them ahead of their turn.
        assert released == [i for i in released if i in set(due)] + [i for i in released if i not in set(due)]
        assert len(released) == len(set(released))
        assert len(set(released) - set(due)) <= _read_ahead.BUILT_TOGETHER - 1
        # A turn that releases anything releases the next held ones with it, when there are any.
        if got and len(held):
            assert len(set(released) - set(due)) == _read_ahead.BUILT_TOGETHER - 1
    order = [id(m) for batch in batches for m in batch]
    assert released == sorted(released, key=order.index)


def test_the_turn_after_a_release_together_releases_nothing() -> None:
    held = HeldOutputs()
    long = "x" * 400
    turns = [[Message.tool(f"c{n}", f"output {n} {long}", name="bash")] for n in range(6)]
    released = [[m.tool_call_id for m, _ in held.release(batch, 3, _count, _DIGEST_TOKENS)] for batch in turns]
    # keep 3: the newest 2 results stay held; the third output is due on the fourth turn, and goes with the next one.
    assert released == [[], [], ["c0", "c1"], [], ["c2", "c3"], []]
