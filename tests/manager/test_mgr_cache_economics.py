"""Cache-aware decisions (issue 25): a rewrite of the history waits while it does not pay for the prompt cache it
invalidates, up to the hard threshold, which always acts; every verdict is an event with its figures."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from contextfold import ContextManager
from contextfold.manager._answered_view import WIDENED_META
from contextfold.manager._masking import MASK_HEADROOM
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import CacheDecision, CompactWarning, RecordingTelemetry

# About 1,000 tokens of numbered lines: under the 16K window's write-time cap, so each output stays whole.
OUTPUT = "\n".join(f"{n:4d}  result_{n} = measure({n}) + offset_{n * 3}" for n in range(1, 70))
# 600 numbered lines, cut at write time to ~1,700 tokens: the answered output is then shown wider.
LISTING = "\n".join(f"{n:6d}\t    value_{n} = compute({n}, offset={n * 7})" for n in range(1, 601))


def manager(**policy: object) -> tuple[ContextManager, RecordingTelemetry]:
    sink = RecordingTelemetry()
    # Batches of 1,000 tokens are worth masking: at soft the masking frees enough, no summary is needed.
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive=False, telemetry=sink,
                        message_id_prefix="t", policy={"clear_at_least": 1_000, **policy})
    cm.add([Message.system("You are a coding agent."), Message.user("measure every module and report")])
    return cm, sink


def run(cm: ContextManager, turns: int, output: str = OUTPUT) -> list[tuple[int, int]]:
    """(tokens sent, maskings so far) after each prepare() of ``turns`` tool-calling turns."""
    sent = []
    for n in range(turns):
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"c{n}", "measure", f'{{"module": {n}}}')]),
                Message.tool(f"c{n}", output.replace("measure", f"measure{n}"))])
        cm.prepare()
        sent.append((cm.tokens(), cm.maskings))
    return sent


def decisions(sink: RecordingTelemetry, action: str = "mask") -> list[CacheDecision]:
    return [e for e in sink.of_type(CacheDecision) if e.action == action]


def test_at_anthropic_prices_masking_waits_until_hard_then_frees_a_big_batch_at_once() -> None:
    cm, sink = manager(cache_pricing="claude-sonnet-4")
    sent = run(cm, 20)
    hard, soft = cm.budgets.hard, cm.budgets.soft
    assert all(tokens <= hard for tokens, _ in sent)
    first = next(i for i, (_, maskings) in enumerate(sent) if maskings)
    # Nothing was masked while the view sat between soft and hard ...
    assert any(tokens > soft for tokens, _ in sent[:first])
    waited = [d for d in decisions(sink) if not d.applied]
    assert waited and all(d.invalidation_cost > d.expected_saving and not d.forced for d in waited)
    for d in waited:  # the figures are the economics of billing/economics.py at Claude Sonnet 4's rates
        assert d.pricing == "claude-sonnet-4"
        # (the horizon is shown to two decimals)
        assert d.expected_saving == pytest.approx(0.1 * d.tokens_freed * d.horizon_turns, abs=0.0005 * d.tokens_freed)
        assert d.invalidation_cost == pytest.approx(1.15 * d.invalidated_tokens - 1.25 * d.tokens_freed, abs=1)
    # ... and the masking the hard threshold forced freed far more than a soft batch would have.
    forced = [d for d in decisions(sink) if d.forced]
    assert forced and forced[0].applied
    assert forced[0].tokens_freed > hard - soft


def test_at_openai_prices_masking_pays_at_the_soft_threshold() -> None:
    cm, sink = manager()  # gpt-4o: cached input at half price, nothing for writing
    sent = run(cm, 20)
    first = next(i for i, (_, maskings) in enumerate(sent) if maskings)
    assert sent[first - 1][0] <= cm.budgets.soft < cm.budgets.hard
    paid = [d for d in decisions(sink) if d.applied and not d.forced]
    assert paid and paid[0].pricing == "gpt-4o"
    assert all(d.expected_saving >= d.invalidation_cost for d in paid)
    assert all(tokens <= cm.budgets.hard for tokens, _ in sent)


def test_cache_aware_off_acts_on_the_thresholds_alone() -> None:
    aware, _ = manager(cache_pricing="claude-sonnet-4")
    plain, sink = manager(cache_pricing="claude-sonnet-4", cache_aware=False)
    assert run(plain, 20) == run(manager()[0], 20)  # as at OpenAI's prices, where every masking pays
    run(aware, 20)
    assert (aware.maskings, plain.maskings) == (2, 6)
    assert sink.of_type(CacheDecision) == []


def listings(cm: ContextManager, turns: int) -> list[list[str]]:
    """The fingerprints of the view sent after each of ``turns`` turns that each read a long listing."""
    sent = []
    for n in range(turns):
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"v{n}", "view", f'{{"path": "m{n}.py"}}')]),
                Message.tool(f"v{n}", LISTING.replace("value", f"value{n}"))])
        cm.prepare()
        sent.append([m.fingerprint() for m in cm.messages()])
    return sent


def test_at_anthropic_prices_a_wider_output_stays_when_putting_it_back_costs_more_than_it_saves() -> None:
    # (soft at 80% of hard: the four listings stay under it, so no compaction rewrites the view in between; at 60%
    # the fourth call's soft compaction pays, since it takes the place of the one hard would force two calls on)
    cm, sink = manager(cache_pricing="claude-sonnet-4", soft_pct=0.8)
    sent = listings(cm, 4)
    # Putting a listing back would write everything from it on again at 1.25x, to save reading ~1,700 tokens at
    # 0.1x per call: each request only appends to the one before, which the provider reads from its cache whole.
    for before, after in itertools.pairwise(sent):
        assert after[:len(before)] == before
    # The call after a wider one still shows its output as written (`CacheEconomics.may_widen`), so the
    # first and the third listing are wider, and both stay.
    assert [bool(m.meta.get(WIDENED_META)) for m in cm.messages() if m.role == "tool"] == [True, False, True, False]
    kept = decisions(sink, "narrow")
    assert len(kept) == 2 and not any(d.applied for d in kept)
    assert all(d.invalidation_cost > d.expected_saving and d.pricing == "claude-sonnet-4" for d in kept)
    assert "previous call showed a wider output" in decisions(sink, "widen")[0].reason
    # At OpenAI's prices (cached input at half price, writing free) putting it back pays at once: only the output
    # being answered is wider.
    openai, openai_sink = manager()
    listings(openai, 3)
    assert sum(bool(m.meta.get(WIDENED_META)) for m in openai.messages()) == 1
    put_back = decisions(openai_sink, "narrow")
    assert len(put_back) == 2 and all(d.applied and d.pricing == "gpt-4o" for d in put_back)
    # Without cache awareness, every wider output goes back as soon as the agent moves on.
    plain, plain_sink = manager(cache_pricing="claude-sonnet-4", cache_aware=False)
    listings(plain, 3)
    assert sum(bool(m.meta.get(WIDENED_META)) for m in plain.messages()) == 1
    assert plain_sink.of_type(CacheDecision) == []


def test_a_soft_compaction_due_joins_the_masking_the_hard_threshold_forces() -> None:
    # Nine kept tool pairs hold 11K tokens: masking alone at hard frees one output and would be forced again two
    # calls later. The summary that waited at soft joins the forced masking: one rewrite lands far lower.
    cm, sink = manager(cache_pricing="claude-sonnet-4", keep_tool_io_pairs=9, keep_recent_turns=2)
    sent = []
    for _ in range(16):
        run(cm, 1)
        sent.append((cm.tokens(), cm.maskings, cm.compactions))
    # The first soft compaction (7 calls in, hard 4 calls away) frees enough to stay under hard for as long again:
    # it takes the place of the rewrite hard would force, and pays at once.
    first_soft = decisions(sink, "soft")[0]
    assert first_soft.applied and first_soft.replaces_forced and "takes the place" in first_soft.reason
    first = next(i for i, (_, maskings, _) in enumerate(sent) if maskings)
    tokens, maskings, compactions = sent[first]
    assert maskings == 1 and compactions == sent[first - 1][2] + 1  # in the same call
    assert tokens < (cm.budgets.soft + cm.budgets.hard) // 2  # (masking alone: one output, ~12.6K)
    # In between, the summary waited: the cache economics said so, and said why.
    waited = [d for d in decisions(sink, "soft") if not d.applied]
    assert waited and all(d.invalidation_cost > d.expected_saving for d in waited)
    # No "compaction_stalled" warning for a summary that only waited for the cache to pay.
    assert [e for e in sink.of_type(CompactWarning) if e.code == "compaction_stalled"] == []
    # The next forced rewrite is at least five calls away.
    later = [i for i, (_, maskings, _) in enumerate(sent) if maskings > 1]
    assert not later or later[0] - first >= 5


def test_no_wider_output_right_after_a_rewrite_at_anthropic_prices() -> None:
    # The call after a masking reads only the pinned head's cache entry; a wider output now would leave the next
    # call nothing to read either.
    cm, sink = manager(cache_pricing="claude-sonnet-4")
    run(cm, 10)  # the view is at hard: the next call masks
    maskings = cm.maskings
    cm.add([Message.assistant("look", [ToolCall("v", "view", '{"path": "big.py"}')]), Message.tool("v", LISTING)])
    cm.prepare()
    assert cm.maskings == maskings + 1
    assert not any(m.meta.get(WIDENED_META) for m in cm.messages())
    assert "this call rewrote the history" in decisions(sink, "widen")[-1].reason


def test_a_summary_waits_until_the_view_has_grown_clear_at_least_since_a_masking_batch() -> None:
    """Issue 25: a soft compaction a few calls after a masking batch paid the prompt cache a second time and
    summarized outputs the batch had just masked (claude4sonnet at OpenAI's rates lost two facts that way). The view
    right after a batch is a floor, as after a compaction: the summary waits until the view has grown
    ``clear_at_least`` since."""
    cm, _ = manager(clear_at_least=3_000, keep_tool_io_pairs=5)
    sent = run(cm, 7)
    assert sent[-1][1] == 1 and cm.compactions == 0  # the 7th output crossed soft: a batch masked the 2 oldest
    after_batch = sent[-1][0]
    grown: list[tuple[int, int]] = []  # (view before the call, compactions after it)
    for n in range(8):
        cm.add([Message.assistant(f"noted {n}: " + " ".join(f"w{n}_{k}" for k in range(120))),
                Message.user(f"go on {n}")])
        before = cm.tokens()
        cm.prepare()
        grown.append((before, cm.compactions))
    first = next(i for i, (_, c) in enumerate(grown) if c)
    waited = [t for t, _ in grown[:first] if t > cm.budgets.soft]
    assert waited and all(t - after_batch < 3_000 for t in waited)  # over soft, too soon after the batch: it waits
    assert grown[first][0] - after_batch >= 3_000  # grown enough: the summary comes


def test_at_anthropic_prices_one_deep_masking_takes_the_place_of_the_forced_one() -> None:
    """Six big outputs, then small ones: at soft, masking just enough to get under it does not pay at Claude's
    prices (the view would reach hard again within the calls the session is expected to last, and pay a second
    rewrite), but masking every output it may take keeps the view under hard for that long: it replaces the rewrite
    the hard threshold would force, and the calls after it append."""
    cm, sink = manager(cache_pricing="claude-sonnet-4")
    run(cm, 6)
    small = "\n".join(f"line {n}: ok" for n in range(12))
    sent = run(cm, 12, small)
    assert all(tokens < cm.budgets.hard for tokens, _ in sent)  # never at hard
    applied = [d for d in decisions(sink) if d.applied]
    assert len(applied) == 1 and not applied[0].forced and applied[0].tokens > cm.budgets.soft
    assert "takes the place of the rewrite the hard threshold forces" in applied[0].reason
    assert applied[0].replaces_forced and not any(d.replaces_forced for d in decisions(sink) if not d.applied)
    assert applied[0].expected_saving > applied[0].invalidation_cost
    # Far more than getting under soft with headroom asks for (the shallow batch, which did not pay).
    assert applied[0].tokens_freed > 2 * (applied[0].tokens - int(cm.budgets.soft * MASK_HEADROOM))
    # Every big output is masked in that one batch (all but the 4 recent pairs, keep_tool_io_pairs, at the time).
    assert cm.maskings == 1
    outputs = [m for m in cm.messages() if m.role == "tool"]
    masked = [m.text.startswith("[tool output trimmed") for m in outputs]
    assert masked[:6] == [True] * 6 and masked[-4:] == [False] * 4


def test_after_an_idle_gap_longer_than_the_cache_lifetime_the_waiting_masking_happens_at_once() -> None:
    """At Claude's prices a masking batch between soft and hard waits (it would pay for the cache it invalidates);
    when the session then sits idle past the cache's 5-minute lifetime, the provider has dropped the cache: the next
    call writes the whole view anyway, so the batch is taken then, and its event says why."""
    now = [datetime(2026, 11, 26, 12, 0, tzinfo=UTC)]
    sink = RecordingTelemetry()
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive=False, telemetry=sink,
                        message_id_prefix="t", clock=lambda: now[0],
                        policy={"clear_at_least": 1_000, "cache_pricing": "claude-sonnet-4"})
    cm.add([Message.system("You are a coding agent."), Message.user("measure every module and report")])
    waited = 0
    for n in range(20):
        now[0] += timedelta(seconds=30)
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"c{n}", "measure", f'{{"module": {n}}}')]),
                Message.tool(f"c{n}", OUTPUT.replace("measure", f"measure{n}"))])
        cm.prepare()
        waited = sum(1 for d in decisions(sink) if not d.applied)
        if waited:
            break
    assert waited and cm.maskings == 0 and cm.tokens() > cm.budgets.soft
    now[0] += timedelta(minutes=6)  # the user went for coffee
    cm.add([Message.user("also measure the tests")])
    cm.prepare()
    assert cm.maskings == 1
    taken = decisions(sink)[-1]
    assert taken.applied and not taken.forced and taken.invalidated_tokens == 0
    assert "the cache expired (idle 360 s, lifetime 300 s)" in taken.reason
