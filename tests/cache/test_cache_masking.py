"""Observation masking: the oldest eligible outputs go first, by ref, and nothing else changes."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, mask_tool_outputs, masked_placeholder, tool_output_tokens
from contextfold.errors import InvalidHistory
from contextfold.messages import ImagePart, Message, TextPart, ToolCall
from contextfold.pairing import tool_pairs
from contextfold.stores.memory import MemoryBlobStore
from contextfold.tokens import EstimatingCounter, MessageCounter

COUNTER = MessageCounter(EstimatingCounter())
TOOLS = ("bash", "view", "todo_write", "search")


@dataclass(frozen=True)
class Turn:
    calls: tuple[tuple[str, int], ...]  # (tool name, output size in chars)


turns = st.lists(
    st.builds(
        Turn,
        st.lists(
            st.tuples(st.sampled_from(TOOLS), st.integers(0, 3_000)),
            min_size=1,
            max_size=3,
        ).map(tuple),
    ),
    min_size=0,
    max_size=12,
)


def history(turn_list: list[Turn], protected_every: int = 0) -> list[Message]:
    messages = [Message.system("You are an agent."), Message.user("fix the bug")]
    n = 0
    for t, turn in enumerate(turn_list):
        calls = []
        for name, _ in turn.calls:
            n += 1
            calls.append(ToolCall(f"call_{n}", name, json.dumps({"arg": "v" * (n % 7)})))
        messages.append(Message.assistant(f"step {t}", calls))
        for call, (_, size) in zip(calls, turn.calls, strict=True):
            idx = int(call.id.split("_")[1])
            meta = {"protected": True} if protected_every and idx % protected_every == 0 else {}
            body = "".join(f"{call.id} line {k} {'o' * (k % 13)}\n" for k in range(size // 20))
            messages.append(Message.tool(call.id, body, name=None, meta=meta))
    return messages


def eligible(messages: list[Message], keep: int, exclude: set[str]) -> list[int]:
    """The test's own reading of who may be masked, oldest first."""
    names = {}
    for call_id, (ci, ri) in tool_pairs(messages).items():
        if ri is not None:
            names[ri] = next(c.name for c in messages[ci].tool_calls if c.id == call_id)
    results = [i for i, m in enumerate(messages) if m.role == "tool"]
    last = set(results[-keep:]) if keep else set()
    # The results of the latest call, when the history ends in them, are what the model answers: never masked.
    if messages and messages[-1].role == "tool":
        caller = max(i for i, m in enumerate(messages) if m.tool_calls)
        last |= {i for i in results if i > caller}

    def placeholder_cost(m: Message) -> int:
        return COUNTER.count_message(m.with_content(masked_placeholder("tout_" + "f" * 16)))

    return [
        i
        for i in results
        if i not in last
        and not messages[i].protected
        and names.get(i) not in exclude
        and messages[i].kind != "masked"
        and COUNTER.count_message(messages[i]) > placeholder_cost(messages[i])
    ]


@settings(max_examples=150, deadline=None)
@given(
    turn_list=turns,
    budget=st.integers(0, 6_000),
    keep=st.integers(0, 4),
    clear_at_least=st.integers(0, 3_000),
    exclude=st.sets(st.sampled_from(TOOLS), max_size=2),
    protected_every=st.sampled_from([0, 3, 5]),
)
def test_masking_invariants(
    turn_list: list[Turn], budget: int, keep: int, clear_at_least: int, exclude: set[str], protected_every: int
) -> None:
    original = history(turn_list, protected_every)
    cache = ToolOutputCache(MemoryBlobStore())
    result = mask_tool_outputs(
        original,
        budget_tokens=budget,
        counter=COUNTER,
        cache=cache,
        keep_tool_io_pairs=keep,
        exclude_tools=exclude,
        clear_at_least=clear_at_least,
    )
    out = result.messages
    masked = list(result.masked_indices)
    total = tool_output_tokens(original, COUNTER)

    # Order, length, roles and pairs are untouched.
    assert len(out) == len(original)
    assert [(m.role, m.tool_call_id, m.tool_calls) for m in out] == [
        (m.role, m.tool_call_id, m.tool_calls) for m in original
    ]
    assert tool_pairs(out) == tool_pairs(original)

    # Exactly the oldest eligible outputs, and only as many as needed to cover the excess and the batch size.
    candidates = eligible(original, keep, exclude)
    assert masked == candidates[: len(masked)]
    if total <= budget:
        assert masked == [] and out == original
    else:
        target = max(total - budget, clear_at_least)
        saved = [COUNTER.count_message(original[i]) - COUNTER.count_message(out[i]) for i in masked]
        if masked:
            assert sum(saved[:-1]) < target
        if len(masked) < len(candidates):
            assert sum(saved) >= target
            assert result.tool_output_tokens <= budget

    # Protected, excluded and recent outputs are never masked; unmasked messages are the very same objects.
    for i, (before, after) in enumerate(zip(original, out, strict=True)):
        if i in masked:
            ref = after.meta["ref"]
            assert after.text == masked_placeholder(ref)
            assert after.kind == "masked"
            assert cache.get(ref) == before.text
        else:
            assert after is before

    # The prefix before the first masked message is kept, and the invalidated prefix is counted from there.
    if masked:
        assert out[: masked[0]] == original[: masked[0]]
        assert result.prefix_tokens_invalidated == COUNTER.count_messages(original[masked[0] :])
        assert result.tokens_freed == COUNTER.count_messages(original) - COUNTER.count_messages(out)
    else:
        assert result.prefix_tokens_invalidated == 0 and result.tokens_freed == 0
    assert result.tool_output_tokens == tool_output_tokens(out, COUNTER)


def test_masking_again_only_masks_newer_outputs() -> None:
    msgs = history([Turn((("bash", 2_000),))] * 8)
    cache = ToolOutputCache(MemoryBlobStore())
    first = mask_tool_outputs(msgs, budget_tokens=1_500, counter=COUNTER, cache=cache, clear_at_least=0)
    assert first.masked_indices
    second = mask_tool_outputs(first.messages, budget_tokens=1_500, counter=COUNTER, cache=cache, clear_at_least=0)
    assert second.masked_indices == ()
    assert second.messages == first.messages


def test_batches_of_clear_at_least_free_more_than_the_excess_so_the_prefix_breaks_rarely() -> None:
    msgs = history([Turn((("bash", 2_000),))] * 10)
    total = tool_output_tokens(msgs, COUNTER)
    small = mask_tool_outputs(
        msgs, budget_tokens=total - 10, counter=COUNTER, cache=ToolOutputCache(MemoryBlobStore()), clear_at_least=0
    )
    big = mask_tool_outputs(
        msgs, budget_tokens=total - 10, counter=COUNTER, cache=ToolOutputCache(MemoryBlobStore()), clear_at_least=1_500
    )
    assert len(small.masked_indices) == 1
    assert len(big.masked_indices) > 1
    assert big.tokens_freed >= 1_500


def test_truncated_outputs_keep_their_ref_and_full_text() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    full = "".join(f"line {i}\n" for i in range(20_000))
    truncated = cache.process(Message.tool("call_1", full))
    msgs = [
        Message.user("go"),
        Message.assistant("", [ToolCall("call_1", "bash")]),
        truncated,
        Message.assistant("", [ToolCall("call_2", "bash")]),
        Message.tool("call_2", "small"),
    ]
    result = mask_tool_outputs(msgs, budget_tokens=10, counter=COUNTER, cache=cache, keep_tool_io_pairs=1)
    assert result.masked_indices == (2,)
    masked = result.messages[2]
    assert masked.meta["ref"] == truncated.meta["ref"]
    assert masked.meta["original_bytes"] == len(full.encode())
    assert cache.get(masked.meta["ref"]) == full


def test_outputs_with_images_are_never_masked() -> None:
    msgs = [
        Message.user("go"),
        Message.assistant("", [ToolCall("c1", "screenshot"), ToolCall("c2", "bash")]),
        Message("tool", (TextPart("x" * 4_000), ImagePart(url="https://x/y.png")), tool_call_id="c1"),
        Message.tool("c2", "y" * 4_000),
        Message.assistant("done"),
        Message.user("thanks"),
    ]
    result = mask_tool_outputs(
        msgs, budget_tokens=0, counter=COUNTER, cache=ToolOutputCache(MemoryBlobStore()), keep_tool_io_pairs=0
    )
    assert result.masked_indices == (3,)


def test_clearing_tool_inputs_stores_and_replaces_the_arguments() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    big_args = json.dumps({"path": "/a", "file_text": "print('hi')\n" * 100})
    msgs = [
        Message.user("go"),
        Message.assistant("writing", [ToolCall("c1", "create", big_args)]),
        Message.tool("c1", "created\n" * 500),
        Message.assistant("", [ToolCall("c2", "bash", "{}")]),
        Message.tool("c2", "ok"),
    ]
    result = mask_tool_outputs(
        msgs, budget_tokens=5, counter=COUNTER, cache=cache, keep_tool_io_pairs=1, clear_tool_inputs=True
    )
    call = result.messages[1].tool_calls[0]
    trimmed = json.loads(call.arguments)
    assert trimmed["trimmed"] is True
    assert cache.get(trimmed["ref"]) == big_args
    assert (call.id, call.name) == ("c1", "create")
    assert result.messages[1].text == "writing"
    # The invalidated prefix now starts at the assistant message whose arguments changed.
    assert result.prefix_tokens_invalidated == COUNTER.count_messages(msgs[1:])
    assert tool_pairs(result.messages) == tool_pairs(msgs)


def test_bad_input_is_named() -> None:
    with pytest.raises(InvalidHistory, match="message 1: expected a Message, got dict"):
        mask_tool_outputs(
            [Message.user("x"), {"role": "tool"}],  # type: ignore[list-item]
            budget_tokens=0,
            counter=COUNTER,
            cache=ToolOutputCache(MemoryBlobStore()),
        )
    with pytest.raises(ValueError, match="budget_tokens must be an integer >= 0"):
        mask_tool_outputs([], budget_tokens=-1, counter=COUNTER, cache=ToolOutputCache(MemoryBlobStore()))


def test_cache_mask_uses_the_configured_budget() -> None:
    msgs = history([Turn((("bash", 3_000),))] * 40)
    cache = ToolOutputCache(MemoryBlobStore(), context_window=32_000)
    result = cache.mask(msgs, counter=COUNTER, clear_at_least=0)
    assert result.masked_indices
    assert result.tool_output_tokens <= 20_000 < tool_output_tokens(msgs, COUNTER)


def test_a_placeholder_keeps_a_digest_of_what_it_replaced_within_its_budget() -> None:
    listing = "\n".join(f"{n:6d}\t    total_{n} = 0" for n in range(1, 100))  # (read whole: under the windows)
    listing += "\n   400\tdef settle_account(ledger):\n   401\t    raise LedgerError('ACC-7731')"
    msgs = [
        Message.system("s"),
        Message.user("fix ledger.py"),
        Message.assistant("", [ToolCall("c1", "view", '{"path": "/srv/ledger.py"}')]),
        Message.tool("c1", listing),
        Message.assistant("", [ToolCall("c2", "bash", '{"cmd": "pytest"}')]),
        Message.tool("c2", "1 failed"),
    ]
    cache = ToolOutputCache(MemoryBlobStore())
    result = mask_tool_outputs(msgs, budget_tokens=0, counter=COUNTER, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=24)
    assert result.masked_indices == (3,)
    placeholder = result.messages[3].text
    ref = result.messages[3].meta["ref"]
    assert placeholder.startswith(f"[tool output trimmed; ref={ref}; it mentioned: settle_account:400, ")
    assert "LedgerError" in placeholder and "/srv/ledger.py" not in placeholder  # the call names the path
    bare = COUNTER.count_message(msgs[3].with_content(masked_placeholder(ref)))
    assert COUNTER.count_message(result.messages[3]) <= bare + 24 + 2
    assert cache.get(ref) == listing


def test_the_digest_of_a_long_output_reads_its_two_ends_and_says_so() -> None:
    # Issue 22: a digest is a few dozen tokens; reading all of a 70K-character output for it was most of the
    # read-ahead. Its first and last lines are read (whole lines), the middle is left to the ref.
    from contextfold.cache import _digest

    head = "\n".join(f"/srv/head/module_{n}.py: ok" for n in range(40))
    middle = "\n".join(f"middle_name_{n} = {n}" for n in range(5_000))
    tail = "\n".join(["FAILED tests/test_tail.py::test_settle", "TailError: ACC-7731"])
    text = f"{head}\n{middle}\n{tail}"
    source, partial = _digest.digest_source(text)
    assert partial and len(source) <= _digest.DIGEST_HEAD_CHARS + _digest.DIGEST_TAIL_CHARS + 1
    assert source.startswith(head) and source.endswith(tail)
    assert all(line in text.splitlines() for line in source.splitlines())  # whole lines only
    msgs = [
        Message.system("s"),
        Message.assistant("", [ToolCall("c1", "bash", '{"cmd": "make test"}')]),
        Message.tool("c1", text),
        Message.assistant("", [ToolCall("c2", "bash", '{"cmd": "ls"}')]),
        Message.tool("c2", "ok"),
    ]
    cache = ToolOutputCache(MemoryBlobStore())
    result = mask_tool_outputs(msgs, budget_tokens=0, counter=COUNTER, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=24)
    placeholder = result.messages[2].text
    ref = result.messages[2].meta["ref"]
    assert placeholder.startswith(f"[tool output trimmed; ref={ref}; its first and last lines mentioned: ")
    assert "/srv/head/module_0.py" in placeholder and "middle_name" not in placeholder
    assert cache.get(ref) == text  # the whole output stays readable
    material = _digest.digest_material(text)
    assert material.partial and {"TailError", "ACC-7731", "/srv/head/module_39.py"} <= set(material.items)
    assert not {"middle_name_2500", "2500"} & set(material.items)  # (the middle, far from both windows)
    short = _digest.digest_material("/srv/a.py failed")
    assert not short.partial and "/srv/a.py" in short.items


def test_each_masked_output_is_copied_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A masked output becomes its placeholder in one copy, not a content copy then a meta copy (issue 22)."""
    msgs = history([Turn((("bash", 2_000),)) for _ in range(6)])
    msgs = [m.with_content(m.text.replace("line", "lineqv7e3")) if m.role == "tool" else m for m in msgs]
    copies = 0
    real = Message._copy

    def counted(self: Message, *args: object, **kwargs: object) -> Message:
        nonlocal copies
        copies += 1
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Message, "_copy", counted)
    result = mask_tool_outputs(msgs, budget_tokens=0, counter=COUNTER, cache=ToolOutputCache(MemoryBlobStore()),
                               keep_tool_io_pairs=1, clear_at_least=0)
    assert len(result.masked_indices) >= 4
    assert copies == len(result.masked_indices) + 1  # (and the placeholder's shape, counted once per tool name)
    assert all(result.messages[i].kind == "masked" and "ref" in result.messages[i].meta
               for i in result.masked_indices)
