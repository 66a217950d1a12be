"""Thresholds and warnings as the design documents give them (002 §Phase 1-2, 004 §2, 000 §Risks)."""

from __future__ import annotations

import logging

import pytest

from contextfold.manager import ContextManager
from contextfold.telemetry import RecordingTelemetry


def _manager(sink: RecordingTelemetry, **policy: object) -> ContextManager:
    return ContextManager("gpt-4o", store="memory", archive="memory", telemetry=sink, policy=policy or None)


def test_an_input_over_256_kb_is_logged_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    sink = RecordingTelemetry()
    cm = _manager(sink)
    try:
        with caplog.at_level(logging.WARNING, logger="contextfold"):
            cm.add({"role": "user", "content": "x" * (256 * 1024)})  # exactly the limit: fine
            cm.add({"role": "user", "content": "é" * (128 * 1024 + 1)})  # 2 bytes each: one byte over
        warnings = [e for e in sink.events if e.name == "compact.warning" and e.code == "large_input"]
        assert len(warnings) == 1
        assert "262,146 bytes, over the 262,144-byte input limit" in warnings[0].message
        assert [r.getMessage() for r in caplog.records] == [warnings[0].message]
    finally:
        cm.close()


def test_the_input_limit_is_a_policy_field() -> None:
    sink = RecordingTelemetry()
    cm = _manager(sink, large_input_bytes=10)
    try:
        cm.add({"role": "user", "content": "eleven byte"})
        assert [e.code for e in sink.events if e.name == "compact.warning"] == ["large_input"]
    finally:
        cm.close()


def _long_history(turns: int, size: int = 400) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"role": "system", "content": "You are an agent."}]
    for i in range(turns):
        out += [{"role": "user", "content": f"request {i}: " + "please look at the logs " * size},
                {"role": "assistant", "content": f"answer {i}: " + "the logs look fine " * size}]
    return out


def test_hard_compaction_at_the_start_of_a_turn_is_logged_as_an_emergency(caplog: pytest.LogCaptureFixture) -> None:
    sink = RecordingTelemetry()
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", telemetry=sink)
    try:
        cm.add(_long_history(8))  # ~13,000 tokens: over the hard threshold (85% of 16K)
        with caplog.at_level(logging.WARNING, logger="contextfold"):
            cm.prepare()
        emergencies = [e.message for e in sink.events if e.name == "compact.warning" and e.code == "emergency"]
        assert len(emergencies) == 1 and emergencies[0].startswith("hard compaction before the model call: ")
        assert emergencies[0] in [r.getMessage() for r in caplog.records]
        assert cm.tokens() <= cm.budgets.hard
    finally:
        cm.close()


def test_idle_compaction_has_its_own_threshold_and_a_pre_compaction_hook() -> None:
    seen: list[tuple[int, str]] = []

    def hook(leaving: list[object], summary: object) -> None:
        seen.append((len(leaving), type(summary).__name__))

    window = 40_000
    cm = ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive="memory",
                        policy={"sleep_pct": 0.3}, before_compaction=hook)
    try:
        cm.add(_long_history(4))  # ~14,500 tokens: over the sleep threshold (12,000), under soft (20,400)
        assert cm.policy.sleep_threshold(window) == 12_000 < cm.tokens() < cm.budgets.soft
        future = cm.compact_in_background()
        assert future is not None
        future.result()
        cm.prepare()  # applies the idle result
        assert cm.status().compactions == 1
        assert len(seen) == 1 and seen[0][0] > 0 and seen[0][1] == "SummaryResult"
    finally:
        cm.close()


def test_idle_compaction_waits_below_the_sleep_threshold() -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=40_000, store="memory", archive="memory")  # sleep at 50%
    try:
        cm.add(_long_history(4))
        assert cm.tokens() < cm.policy.sleep_threshold(40_000)
        assert cm.compact_in_background() is None
    finally:
        cm.close()


def test_a_failing_hook_is_reported_and_the_compaction_still_happens() -> None:
    sink = RecordingTelemetry()

    def hook(leaving: list[object], summary: object) -> None:
        raise RuntimeError("memory store down")

    cm = ContextManager("gpt-4o", store="memory", archive="memory", telemetry=sink, before_compaction=hook,
                        policy={"keep_recent_turns": 1})
    try:
        cm.add(_long_history(6, size=20))
        report = cm.compact()
        assert report.compacted > 0
        assert [e.message for e in sink.events if e.name == "compact.warning" and e.code == "hook_failed"] == [
            "before_compaction hook failed: RuntimeError: memory store down"]
    finally:
        cm.close()


def test_circuit_breaker_half_opens_after_the_cool_down(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextfold.manager._compactor as manager_module
    from contextfold.errors import InsufficientBudget

    now = [1000.0]
    monkeypatch.setattr(manager_module, "_monotonic", lambda: now[0])
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        policy={"circuit_cooldown_s": 30})
    try:
        # A protected message larger than the window: every compaction fails with InsufficientBudget.
        cm.add({"role": "user", "content": "keep " * 9_000, "meta": {"protected": True}})
        for _ in range(3):
            with pytest.raises(InsufficientBudget):
                cm.compact()
        assert cm.paused
        now[0] += 29.0
        assert cm.paused  # still open during the cool-down
        now[0] += 1.0
        assert not cm.paused  # half-open: the next compaction is tried
        with pytest.raises(InsufficientBudget):
            cm.compact()
        assert cm.paused  # one more failure opens it again ...
        now[0] += 30.0
        assert not cm.paused  # ... for another cool-down
    finally:
        cm.close()


def test_accuracy_warning_comes_before_the_third_compaction() -> None:
    sink = RecordingTelemetry()
    cm = ContextManager("gpt-4o", store="memory", archive="memory", telemetry=sink, policy={"keep_recent_turns": 1})
    try:
        counts = []
        for round_ in range(3):
            cm.add(_long_history(4, size=20)[1:] if round_ else _long_history(4, size=20))
            cm.compact()
            counts.append(sum(1 for e in sink.events if e.name == "compact.warning" and "accuracy" in e.message))
        # Warned after the 2nd, i.e. before a 3rd compaction degrades it further; then at the 4th, 8th, … (not at
        # every one: issue 21 §6).
        assert counts == [0, 1, 1]
    finally:
        cm.close()


@pytest.mark.parametrize("mode", ["raise", "proceed"])
def test_failed_compaction_raises_or_sends_the_view_as_it_is(mode: str) -> None:
    from contextfold.errors import InsufficientBudget

    sink = RecordingTelemetry()
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory", telemetry=sink,
                        policy={"on_compaction_failure": mode})
    try:
        # Pinned text over the hard threshold (6,500) but inside the 8K window: compaction cannot help.
        cm.add([{"role": "system", "content": "rule " * 6_600}, {"role": "user", "content": "hello"}])
        if mode == "raise":
            with pytest.raises(InsufficientBudget):
                cm.prepare()
        else:
            sent = cm.prepare()
            assert [m["role"] for m in sent] == ["system", "user"] and sent[1]["content"] == "hello"
        assert [e.error_type for e in sink.events if e.name == "compact.error"] == ["InsufficientBudget"]
    finally:
        cm.close()
