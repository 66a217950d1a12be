"""Billing a history that only grows costs O(new blocks) per request and gives the same figures as billing it whole.

The reference below is the prompt-cache model written the plain way (every prefix of every request hashed and
stored again, every lookup from the first block): :class:`PromptCache` must agree with it on every request, through
``bill``, ``preview`` and ``extend`` mixed in any order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.billing import Block, PromptCache, SessionMeter, cache_rates
from contextfold.billing.rates import CacheRates

OPENAI = cache_rates("gpt-4o")
ANTHROPIC = cache_rates("claude-sonnet-4")


class PlainCache:
    """The same rules, recomputed from scratch for every request (quadratic over a session)."""

    def __init__(self, rates: CacheRates, breakpoints: str) -> None:
        self.rates, self.breakpoints = rates, breakpoints
        self.entries: dict[bytes, float] = {}

    def bill(self, blocks: Sequence[Block], at: float) -> tuple[int, int, int]:
        rates = self.rates
        if not blocks:
            return 0, 0, 0
        hashes, previous = [], b""
        for b in blocks:
            previous = hashlib.blake2b(previous + b.key.encode(), digest_size=16).digest()
            hashes.append(previous)
        cumulative = [sum(b.tokens for b in blocks[: i + 1]) for i in range(len(blocks))]

        def alive(i: int) -> bool:
            return self.entries.get(hashes[i], float("-inf")) >= at

        if rates.scheme == "automatic":
            hit = -1
            while hit + 1 < len(blocks) and alive(hit + 1):
                hit += 1
            read = 0
            if hit >= 0 and cumulative[hit] >= rates.min_cacheable_tokens:
                over = cumulative[hit] - rates.min_cacheable_tokens
                read = cumulative[hit] - over % rates.increment_tokens
            for h in hashes:
                self.entries[h] = at + rates.lifetime_s
            return read, 0, cumulative[-1] - read
        if self.breakpoints == "marked":
            positions = [i for i, b in enumerate(blocks) if b.breakpoint]
        else:
            pinned = [i for i, b in enumerate(blocks) if b.pinned] if self.breakpoints == "pinned_and_last" else []
            positions = sorted({len(blocks) - 1, *pinned[-1:]})
        if not positions:
            return 0, 0, cumulative[-1]
        hit = -1
        for p in positions:
            walked, i = 0, p
            while i > hit and walked <= rates.lookback_blocks:
                if alive(i):
                    hit = i
                    break
                walked += blocks[i].parts
                i -= 1
        read = cumulative[hit] if hit >= 0 else 0
        end = cumulative[positions[-1]]
        write = end - read if end >= rates.min_cacheable_tokens else 0
        for i in [p for p in positions if cumulative[p] >= rates.min_cacheable_tokens] + ([hit] if hit >= 0 else []):
            self.entries[hashes[i]] = at + rates.lifetime_s
        return read, write, cumulative[-1] - read - write


# A step: append some blocks (extend, or bill the whole request), rewrite from a block on, or preview; and a gap.
_block = st.builds(Block, key=st.sampled_from("abc"), tokens=st.integers(0, 900), parts=st.integers(1, 4),
                   pinned=st.booleans(), breakpoint=st.booleans())
_step = st.tuples(st.sampled_from(["extend", "bill", "rewrite", "preview"]), st.lists(_block, max_size=6),
                  st.integers(0, 8), st.sampled_from([0.0, 30.0, 200.0, 400.0]))


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(_step, min_size=1, max_size=25),
       setup=st.sampled_from([(OPENAI, "pinned_and_last"), (ANTHROPIC, "pinned_and_last"), (ANTHROPIC, "last"),
                              (ANTHROPIC, "marked")]))
def test_every_way_of_billing_agrees_with_the_plain_model(steps: list[tuple[str, list[Block], int, float]],
                                                           setup: tuple[CacheRates, str]) -> None:
    rates, breakpoints = setup
    cache, plain = PromptCache(rates, breakpoints=breakpoints), PlainCache(rates, breakpoints)  # type: ignore[arg-type]
    request: list[Block] = []
    at = 0.0
    for verb, blocks, keep, gap in steps:
        at += gap
        if verb == "preview":
            candidate = request[:keep] + blocks
            got = cache.preview(candidate, at)
            scratch = PlainCache(rates, breakpoints)
            scratch.entries = dict(plain.entries)
            assert (got.cache_read, got.cache_write, got.fresh) == scratch.bill(candidate, at)
            continue
        request = request + blocks if verb in ("extend", "bill") else request[:keep] + blocks
        got = cache.extend(blocks, at) if verb == "extend" else cache.bill(request, at)
        assert got.tokens == sum(b.tokens for b in request)
        assert (got.cache_read, got.cache_write, got.fresh) == plain.bill(request, at), (verb, len(request))


def test_a_growing_history_billed_by_extend_matches_billing_it_whole() -> None:
    """A 400-call session: the same bill per request, whole or extended, at both providers."""
    head = [Block("system", 1_300, pinned=True)]
    whole, grown = SessionMeter(), SessionMeter()
    history = list(head)
    grown.extend(head)
    whole.request(history)
    for n in range(400):
        added = [Block(f"call{n}", 40 + n % 7, parts=2), Block(f"result{n}", 200 + 37 * (n % 11))]
        history += added
        assert whole.request(history) == grown.extend(added)
    for provider in ("openai", "anthropic"):
        assert whole.bills[provider] == grown.bills[provider]
        assert whole.bills[provider].cache_read > 0


def test_a_prefix_a_rewrite_dropped_is_read_again_while_it_lives() -> None:
    """OpenAI keeps every prefix it saw: a request that goes back to one an earlier request had reads it."""
    cache = PromptCache(OPENAI)
    first = [Block("system", 1_100), Block("wide", 600), Block("reply", 300)]
    cache.bill(first, 0.0)
    cache.extend([Block("next", 50)], 30.0)
    narrowed = cache.bill([*first[:1], Block("narrow", 100)], 60.0)
    back = cache.bill([*first, Block("again", 10)], 90.0)
    assert narrowed.cache_read == 1_024
    assert back.cache_read == 1_024 + 896  # 2,000 cached tokens, in steps of 128 past the first 1,024


def test_blocks_of_remembers_a_message_it_counted_and_gives_the_same_blocks() -> None:
    from contextfold.billing import blocks_of
    from contextfold.messages import Message

    counted: list[str] = []

    def count(m: Message) -> int:
        counted.append(m.text)
        return len(m.text)

    system, first, second = Message.system("rules"), Message.user("hello"), Message.assistant("hi there")
    memo: dict[int, tuple[Message, str, int, int]] = {}
    one = blocks_of([system, first], count, memo=memo)
    two = blocks_of([system, first, second], count, marks=[0, 2], memo=memo)
    assert counted == ["rules", "hello", "hi there"]  # each message object counted once
    assert one == blocks_of([system, first], count)
    assert two == blocks_of([system, first, second], count, marks=[0, 2])
    assert [b.breakpoint for b in two] == [True, False, True] and [b.pinned for b in two] == [True, False, False]
    equal_but_new = Message.user("hello")  # another object: counted afresh, same block
    assert blocks_of([system, equal_but_new], count, memo=memo) == one and counted[-1] == "hello"


def test_an_anchor_mark_keeps_the_previous_request_in_reach_after_a_turn_of_many_blocks() -> None:
    """A dozen parallel tool calls add 24 blocks: past the last mark's 20-block lookback, not past the anchor's."""
    from contextfold.billing import blocks_of
    from contextfold.billing.breakpoints import breakpoint_indices
    from contextfold.messages import Message, ToolCall

    def count(m: Message) -> int:
        return 1_500 if m.role == "system" else 100

    before = [Message.system("rules"), Message.user("task"),
              Message.assistant("", [ToolCall("t0", "f", "{}")]), Message("tool", "o", tool_call_id="t0")]
    calls = [ToolCall(f"p{i}", "f", "{}") for i in range(12)]
    results = [Message("tool", f"r{i}", tool_call_id=f"p{i}") for i in range(12)]
    after = [*before, Message.assistant("", calls), *results]
    marks = breakpoint_indices(after)
    # head, the prefix the next masking keeps (the task: the first output's turn follows it), anchor, last
    assert marks == [0, 1, 3, len(after) - 1]
    marked, usual = PromptCache(ANTHROPIC, breakpoints="marked"), PromptCache(ANTHROPIC)
    for cache, marking in ((marked, breakpoint_indices), (usual, lambda _: [])):
        cache.bill(blocks_of(before, count, marks=marking(before)), 0.0)
    second = marked.bill(blocks_of(after, count, marks=marks), 30.0)
    assert second.cache_read == 1_800  # everything the previous request sent
    assert usual.bill(blocks_of(after, count), 30.0).cache_read == 1_500  # only the system prompt


def test_a_second_masking_batch_reads_the_outputs_the_first_one_masked() -> None:
    """The mark before the first output not masked yet keeps what the next masking batch cannot change cached."""
    from contextfold.billing import blocks_of
    from contextfold.billing.breakpoints import breakpoint_indices
    from contextfold.messages import Message, ToolCall

    def count(m: Message) -> int:
        return 1_500 if m.role == "system" else 100

    def turn(i: int, masked: bool) -> list[Message]:
        output = Message("tool", f"[output {i} masked]" if masked else f"output {i}", tool_call_id=f"t{i}")
        return [Message.assistant("", [ToolCall(f"t{i}", "f", "{}")]),
                output.with_meta(kind="masked") if masked else output]

    head = [Message.system("rules"), Message.user("task")]
    first = [*head, *turn(0, True), *turn(1, False), *turn(2, False)]
    second = [*head, *turn(0, True), *turn(1, True), *turn(2, False)]  # the next batch masks output 1
    # after the task, the masked output 0 and its call; before the call of output 1, the first not masked
    assert breakpoint_indices(first) == [0, 3, 7]
    assert breakpoint_indices(second) == [0, 5, 7]
    cache = PromptCache(ANTHROPIC, breakpoints="marked")
    cache.bill(blocks_of(first, count, marks=breakpoint_indices(first)), 0.0)
    bill = cache.bill(blocks_of(second, count, marks=breakpoint_indices(second)), 30.0)
    assert bill.cache_read == 1_800  # the system prompt, the task, output 0's call and placeholder
    assert bill.cache_write == 400


def test_a_batch_past_outputs_masking_never_takes_reads_up_to_the_first_it_could() -> None:
    """Issue 25: the second mark goes past settled outputs (too small to mask), and the request a batch rewrote
    marks where the previous request's second mark was (the bridge), so a batch of 22 blocks still reads it."""
    from contextfold.billing import blocks_of
    from contextfold.billing.breakpoints import breakpoint_indices
    from contextfold.messages import Message, ToolCall

    def count(m: Message) -> int:
        return 1_500 if m.role == "system" else 100

    def view(masked: set[int], outputs: int = 16) -> list[Message]:
        out = [Message.system("rules"), Message.user("task")]
        for i in range(outputs):
            text = f"[output {i} masked]" if i in masked else f"output {i}"
            result = Message("tool", text, tool_call_id=f"t{i}")
            out += [Message.assistant("", [ToolCall(f"t{i}", "f", "{}")]),
                    result.with_meta(kind="masked") if i in masked else result]
        return out

    def result(i: int) -> int:
        return 3 + 2 * i  # the index of output i in a view

    settled = {result(1), result(2)}  # outputs 1 and 2 are smaller than a placeholder
    first, second = view({0}), view({0, *range(3, 14)})  # the batch masks outputs 3-13: 22 blocks
    # first: the head, the last message before output 3's turn (output 2's result), the anchor 15 blocks before
    # the last, the last
    assert breakpoint_indices(first, settled=settled) == [0, result(2), len(first) - 16, len(first) - 1]
    # second: the bridge where that mark was, the first output the next batch can take (14), the last
    marks = breakpoint_indices(second, settled=settled, bridge=result(2))
    assert marks == [0, result(2), result(13), len(second) - 1]
    cache = PromptCache(ANTHROPIC, breakpoints="marked")
    cache.bill(blocks_of(first, count, marks=breakpoint_indices(first, settled=settled)), 0.0)
    bill = cache.bill(blocks_of(second, count, marks=marks), 30.0)
    assert bill.cache_read == 1_500 + 100 + 6 * 100  # the head, the task, outputs 0-2 and their calls
    # without the bridge the batch's 22 blocks put that entry out of reach: only the head is read
    cache = PromptCache(ANTHROPIC, breakpoints="marked")
    cache.bill(blocks_of(first, count, marks=breakpoint_indices(first, settled=settled)), 0.0)
    unbridged = breakpoint_indices(second, settled=settled)
    assert cache.bill(blocks_of(second, count, marks=unbridged), 30.0).cache_read == 1_500


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["user", "turn", "masked", "summary", "receipt"]), max_size=30), st.booleans(),
       st.booleans(), st.data())
def test_marks_are_at_most_four_ascending_and_the_last_history_message_is_one(
        shape: list[str], system: bool, status: bool, data: st.DataObject) -> None:
    """Whatever the view, the outputs settled and the bridge: at most Anthropic's 4 marks, ascending, never on the
    budget line, and the last history message always marked (the next request reads everything from there)."""
    from contextfold.billing.breakpoints import breakpoint_indices
    from contextfold.messages import Message, ToolCall

    view = [Message.system("rules")] if system else []
    for n, kind in enumerate(shape):
        if kind == "user":
            view.append(Message.user(f"u{n}"))
        elif kind in ("turn", "masked"):
            result = Message("tool", f"o{n}", tool_call_id=f"t{n}")
            view += [Message.assistant("", [ToolCall(f"t{n}", "f", "{}")]),
                     result.with_meta(kind="masked") if kind == "masked" else result]
        else:
            view.append(Message.user(f"{kind} {n}").with_meta(kind=kind))
    if status:
        view.append(Message.user("[context: 1,000 tokens]").with_meta(kind="context_status"))
    tools = [i for i, m in enumerate(view) if m.role == "tool"]
    settled = set(data.draw(st.lists(st.sampled_from(tools), unique=True))) if tools else set()
    bridge = data.draw(st.none() | st.integers(-2, len(view) + 2))
    marks = breakpoint_indices(view, settled=settled, bridge=bridge)
    assert len(marks) <= 4 and marks == sorted(set(marks)) and all(0 <= i < len(view) for i in marks)
    assert all(view[i].kind != "context_status" for i in marks)
    history = [i for i, m in enumerate(view) if m.kind != "context_status"]
    if history:
        assert marks and marks[-1] == history[-1]
