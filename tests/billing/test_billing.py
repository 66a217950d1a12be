"""The prompt-cache bill: what each request reads, writes and pays fresh at OpenAI's and Anthropic's caches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.billing import (
    REFERENCE_MODELS,
    Bill,
    Block,
    PromptCache,
    SessionMeter,
    blocks_of,
    cache_rates,
    reference_rates,
)
from contextfold.billing.rates import ANTHROPIC_LOOKBACK_BLOCKS, CacheRates
from contextfold.messages import Message, ToolCall
from contextfold.tokens import get_model

OPENAI = cache_rates("gpt-4o")
ANTHROPIC = cache_rates("claude-sonnet-4")


def conversation(turns: int, *, system: int = 1_500, step: int = 300) -> list[list[Block]]:
    """The requests of an append-only session: a pinned system prompt, then two blocks a turn."""
    head = [Block("system", system, pinned=True)]
    requests = []
    blocks = list(head)
    for n in range(turns):
        blocks = [*blocks, Block(f"call{n}", 40), Block(f"result{n}", step)]
        requests.append(blocks)
    return requests


def total(blocks: list[Block]) -> int:
    return sum(b.tokens for b in blocks)


# -- rates ------------------------------------------------------------------------------------------------------------
def test_rates_come_from_the_registry_prices() -> None:
    assert (OPENAI.scheme, OPENAI.read_ratio, OPENAI.write_ratio) == ("automatic", 0.5, 1.0)
    assert (ANTHROPIC.scheme, ANTHROPIC.read_ratio, ANTHROPIC.write_ratio) == ("breakpoints", pytest.approx(0.1),
                                                                                1.25)
    hour = cache_rates("claude-sonnet-4", ttl="1h")
    assert (hour.write_ratio, hour.lifetime_s) == (2.0, 3_600.0)
    assert (OPENAI.lifetime_s, ANTHROPIC.lifetime_s) == (300.0, 300.0)
    assert cache_rates("gpt-5").read_ratio == pytest.approx(0.1)
    assert cache_rates("claude-haiku-4-5").min_cacheable_tokens == 4_096
    assert cache_rates("claude-3-5-haiku").min_cacheable_tokens == 2_048
    assert ANTHROPIC.min_cacheable_tokens == OPENAI.min_cacheable_tokens == 1_024
    assert dict(REFERENCE_MODELS) == {"openai": "gpt-4o", "anthropic": "claude-sonnet-4"}
    assert set(reference_rates()) == {"openai", "anthropic"}


def test_a_model_without_a_cache_price_pays_every_token_fresh() -> None:
    rates = cache_rates(get_model("some-local-model", context_window=8_000))
    assert rates.scheme == "none" and rates.usd(10, 0, 0) is None
    cache = PromptCache(rates)
    for blocks in conversation(3):
        bill = cache.bill(blocks, 0.0)
        assert (bill.cache_read, bill.cache_write, bill.fresh, bill.units) == (0, 0, total(blocks), total(blocks))


def test_a_bad_ttl_or_breakpoint_layout_is_named() -> None:
    with pytest.raises(ValueError, match="ttl"):
        cache_rates("claude-sonnet-4", ttl="2h")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="breakpoints"):
        PromptCache(ANTHROPIC, breakpoints="every")  # type: ignore[arg-type]


def test_units_and_usd_follow_the_prices() -> None:
    cache = PromptCache(ANTHROPIC)
    requests = conversation(2)
    cache.bill(requests[0], 0.0)
    bill = cache.bill(requests[1], 30.0)
    assert bill.units == pytest.approx(bill.fresh + 0.1 * bill.cache_read + 1.25 * bill.cache_write)
    assert bill.usd == pytest.approx(bill.units * 3.0 / 1e6)


# -- OpenAI: automatic prefix caching ---------------------------------------------------------------------------------
def test_openai_reads_the_previous_request_in_steps_of_128_tokens() -> None:
    cache = PromptCache(OPENAI)
    requests = conversation(4)
    first = cache.bill(requests[0], 0.0)
    assert (first.cache_read, first.fresh) == (0, total(requests[0]))
    for n in (1, 2, 3):
        bill = cache.bill(requests[n], 30.0 * n)
        previous = total(requests[n - 1])
        assert bill.cache_read == 1_024 + (previous - 1_024) // 128 * 128
        assert bill.cache_write == 0
        assert bill.fresh == total(requests[n]) - bill.cache_read


def test_openai_reads_nothing_below_the_minimum() -> None:
    cache = PromptCache(OPENAI)
    requests = conversation(2, system=200, step=100)
    cache.bill(requests[0], 0.0)
    assert cache.bill(requests[1], 30.0).cache_read == 0  # 540 tokens in common: under 1,024


def test_a_rewrite_in_the_middle_keeps_the_prefix_before_it_at_openai() -> None:
    cache = PromptCache(OPENAI)
    requests = conversation(6)
    for n, blocks in enumerate(requests):
        cache.bill(blocks, 30.0 * n)
    masked = list(requests[-1])
    masked[4] = Block("placeholder", 20)  # the second tool result is masked
    bill = cache.bill([*masked, Block("call6", 40), Block("result6", 300)], 180.0)
    before = total(masked[:4])
    assert bill.cache_read == 1_024 + (before - 1_024) // 128 * 128


def test_an_entry_expires_after_its_lifetime_and_a_read_refreshes_it() -> None:
    cache = PromptCache(OPENAI)
    requests = conversation(4)
    cache.bill(requests[0], 0.0)
    assert cache.bill(requests[1], 299.0).cache_read > 0  # within 5 minutes: read, and refreshed
    assert cache.bill(requests[2], 598.0).cache_read > 0  # 299 s after the refresh
    assert cache.bill(requests[3], 899.0).cache_read == 0  # 301 s of silence: gone


def test_an_older_request_still_alive_serves_a_longer_prefix_than_the_last() -> None:
    # The answered output shown wider for one call: the next request goes back to the narrow view, which the
    # request before the wide one had.
    cache = PromptCache(OPENAI)
    base = conversation(3)[-1]
    cache.bill(base, 0.0)
    cache.bill([*base[:-1], Block("result2-wide", 900)], 30.0)
    bill = cache.bill([*base, Block("call3", 40)], 60.0)
    assert bill.cache_read == 1_024 + (total(base) - 1_024) // 128 * 128


def test_preview_changes_nothing() -> None:
    cache = PromptCache(OPENAI)
    requests = conversation(3)
    cache.bill(requests[0], 0.0)
    preview = cache.preview(requests[1], 30.0)
    assert cache.preview(requests[1], 30.0) == preview
    assert cache.bill(requests[1], 30.0) == preview


# -- Anthropic: breakpoints ---------------------------------------------------------------------------------------
def test_anthropic_reads_the_previous_request_and_writes_what_is_new() -> None:
    cache = PromptCache(ANTHROPIC)
    requests = conversation(4)
    first = cache.bill(requests[0], 0.0)
    assert (first.cache_read, first.cache_write, first.fresh) == (0, total(requests[0]), 0)
    for n in (1, 2, 3):
        bill = cache.bill(requests[n], 30.0 * n)
        assert bill.cache_read == total(requests[n - 1])
        assert bill.cache_write == total(requests[n]) - total(requests[n - 1])
        assert bill.fresh == 0


def test_a_rewrite_deep_in_the_history_rewrites_everything_after_the_pinned_head_at_anthropic() -> None:
    cache = PromptCache(ANTHROPIC)
    requests = conversation(20)  # 41 blocks: far more than the 20-block lookback
    for n, blocks in enumerate(requests):
        cache.bill(blocks, 30.0 * n)
    masked = list(requests[-1])
    masked[4] = Block("placeholder", 20)
    bill = cache.bill([*masked, Block("call20", 40), Block("result20", 300)], 600.0)
    assert bill.cache_read == 1_500  # the system prompt's breakpoint still hits
    assert bill.cache_write == total(masked) + 340 - 1_500
    # The same rewrite costs far less at OpenAI: the prefix before it is still read.
    openai = PromptCache(OPENAI)
    for n, blocks in enumerate(requests):
        openai.bill(blocks, 30.0 * n)
    before = total(masked[:4])
    read = openai.bill([*masked, Block("call20", 40), Block("result20", 300)], 600.0).cache_read
    assert read == 1_024 + (before - 1_024) // 128 * 128 > 1_500


def test_a_rewrite_within_the_lookback_reads_the_entry_before_it() -> None:
    cache = PromptCache(ANTHROPIC)
    requests = conversation(20)
    for n, blocks in enumerate(requests):
        cache.bill(blocks, 30.0 * n)
    last = list(requests[-1])
    last[-1] = Block("result19-narrow", 100)  # the newest result changed: the request before it is an entry
    bill = cache.bill([*last, Block("call20", 40)], 600.0)
    assert bill.cache_read == total(requests[-2])
    assert bill.cache_write == total(last) + 40 - total(requests[-2])


def test_anthropic_lookback_is_limited_to_twenty_content_blocks() -> None:
    cache = PromptCache(ANTHROPIC, breakpoints="last")
    requests = conversation(2)
    cache.bill(requests[0], 0.0)
    wide = [*requests[0], *(Block(f"part{i}", 10) for i in range(ANTHROPIC_LOOKBACK_BLOCKS + 1))]
    bill = cache.bill(wide, 30.0)  # 21 new blocks: the entry of the previous request is out of reach
    assert bill.cache_read == 0
    near = [*requests[0], *(Block(f"part{i}", 10) for i in range(ANTHROPIC_LOOKBACK_BLOCKS))]
    cache2 = PromptCache(ANTHROPIC, breakpoints="last")
    cache2.bill(requests[0], 0.0)
    assert cache2.bill(near, 30.0).cache_read == total(requests[0])


def test_anthropic_never_caches_a_prefix_under_its_minimum() -> None:
    cache = PromptCache(ANTHROPIC)
    small = [Block("system", 300, pinned=True), Block("user", 200)]
    first = cache.bill(small, 0.0)
    assert (first.cache_write, first.fresh) == (0, 500)
    bill = cache.bill([*small, Block("reply", 100), Block("result", 800)], 30.0)
    assert bill.cache_read == 0 and bill.cache_write == 1_400


def test_one_hour_cache_outlives_the_five_minute_one_at_twice_the_write_price() -> None:
    requests = conversation(2)
    five, hour = PromptCache(ANTHROPIC), PromptCache(cache_rates("claude-sonnet-4", ttl="1h"))
    for cache in (five, hour):
        cache.bill(requests[0], 0.0)
    assert five.bill(requests[1], 1_000.0).cache_read == 0
    late = hour.bill(requests[1], 1_000.0)
    assert late.cache_read == total(requests[0])
    assert late.units == pytest.approx(0.1 * total(requests[0]) + 2.0 * late.cache_write)


# -- properties -------------------------------------------------------------------------------------------------------
request_lists = st.lists(
    st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(min_value=0, max_value=900)), min_size=1,
             max_size=30),
    min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(requests=request_lists, provider=st.sampled_from(["openai", "anthropic"]),
       gap=st.sampled_from([10.0, 200.0, 400.0]))
def test_every_token_is_billed_once_and_reads_are_a_shared_prefix(
        requests: list[list[tuple[str, int]]], provider: str, gap: float) -> None:
    rates = reference_rates()[provider]
    cache = PromptCache(rates)
    seen: list[list[Block]] = []
    for n, spec in enumerate(requests):
        blocks = [Block(key, tokens, pinned=i == 0) for i, (key, tokens) in enumerate(spec)]
        bill = cache.bill(blocks, gap * n)
        assert bill.cache_read + bill.cache_write + bill.fresh == bill.tokens == total(blocks)
        assert min(bill.cache_read, bill.cache_write, bill.fresh) >= 0
        # What is read is a prefix this request shares with an earlier one.
        longest = 0
        for old in seen:
            shared = 0
            for a, b in zip(old, blocks, strict=False):
                if a.key != b.key:
                    break
                shared += 1
            longest = max(longest, total(blocks[:shared]))
        assert bill.cache_read <= longest
        low = min(rates.read_ratio, 1.0) * bill.tokens
        high = max(rates.write_ratio, 1.0) * bill.tokens
        assert low - 1e-6 <= bill.units <= high + 1e-6
        seen.append(blocks)


# -- messages and sessions --------------------------------------------------------------------------------------------
def test_blocks_of_messages_pin_the_leading_system_prompt_and_count_content_blocks() -> None:
    messages = [Message.system("rules"), Message.user("fix it"),
                Message.assistant("looking", tool_calls=[ToolCall("c1", "read", "{}"), ToolCall("c2", "ls", "{}")]),
                Message.tool("c1", "text"), Message.tool("c2", "files")]
    blocks = blocks_of(messages, lambda m: len(m.text))
    assert [b.pinned for b in blocks] == [True, False, False, False, False]
    assert [b.parts for b in blocks] == [1, 1, 3, 1, 1]
    assert [b.tokens for b in blocks] == [5, 6, 7, 4, 5]
    assert blocks[3].key == messages[3].fingerprint() != blocks[4].key


def test_session_meter_bills_each_request_at_every_provider() -> None:
    meter = SessionMeter(interval_s=30.0)
    requests = conversation(3)
    for blocks in requests:
        bills = meter.request(blocks)
        assert set(bills) == {"openai", "anthropic"}
    tokens = sum(total(b) for b in requests)
    assert meter.bills["openai"].tokens == meter.bills["anthropic"].tokens == tokens
    assert meter.bills["anthropic"].cache_read == total(requests[0]) + total(requests[1])
    with pytest.raises(ValueError, match="interval_s"):
        SessionMeter(interval_s=-1)


def test_bills_add_up_and_round_trip_through_json() -> None:
    a, b = Bill(), Bill()
    cache = PromptCache(OPENAI)
    for n, blocks in enumerate(conversation(3)):
        bill = cache.bill(blocks, 30.0 * n)
        a.add(bill)
        b.add(bill)
    a.merge(b)
    assert a.requests == 6 and a.tokens == 2 * b.tokens and a.units == pytest.approx(2 * b.units)
    assert Bill.from_dict(b.to_dict()).to_dict() == b.to_dict()
    assert b.hit_share == pytest.approx(b.cache_read / b.tokens)
    assert Bill().hit_share is None
    assert isinstance(OPENAI, CacheRates)
