"""A masking turn decides; the ``compact.cache_decision`` event's reason and figures are made on the telemetry thread
(issue 22). The exported events are those 9466d5b exported, byte for byte (``data/cache_decisions.json``:
``python tests/manager/test_mgr_cache_decision_deferred.py > …`` with that tree's ``src`` on the path), with the
``ttl`` the decision was priced at added by lane s19g1 (43 events otherwise unchanged: "5m" at Claude's prices, ""
at gpt-4o's automatic cache)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _processor_exports import exported_per_session

from contextfold import ContextManager
from contextfold.billing.economics import RewriteVerdict
from contextfold.exporters.base import InMemoryExporter
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import BatchProcessor, RecordingTelemetry

GOLDEN = Path(__file__).parent / "data" / "cache_decisions.json"
NONCE = "q7v2k"  # (in the texts: no stale cache can answer for them)
OUTPUT = "\n".join(f"{n:4d}  result_{n} = measure_{NONCE}({n}) + offset_{n * 3}" for n in range(1, 70))
LISTING = "\n".join(f"{n:6d}\t    value_{n} = compute_{NONCE}({n}, offset={n * 7})" for n in range(1, 601))
SMALL = "\n".join(f"line {n}: ok {NONCE}" for n in range(12))
# The span ids are random; everything else of each exported event is compared.
RANDOM_FIELDS = ("span_id", "parent_id")


def _session(telemetry: Any, name: str, **policy: object) -> tuple[ContextManager, Callable[[timedelta], None]]:
    now = [datetime(2026, 11, 27, 6, 0, tzinfo=UTC)]

    def advance(by: timedelta) -> None:
        now[0] += by

    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive=False, telemetry=telemetry,
                        session_id=f"deferred-{name}", clock=lambda: now[0], message_id_prefix="t",
                        policy={"clear_at_least": 1_000, "mask_digest": "full", **policy})  # (the golden's digest)
    cm.counter.wait_exact()  # (until the tokenizer is loaded, counts are estimates: the figures would vary)
    cm.add([Message.system("You are a coding agent."), Message.user(f"measure every module and report {NONCE}")])
    return cm, advance


def _turns(cm: ContextManager, advance: Callable[[timedelta], None], turns: int, output: str = OUTPUT, *,
           tool: str = "measure", idle: timedelta = timedelta(seconds=30)) -> None:
    for n in range(turns):
        advance(idle)
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"{tool}{n}", tool, f'{{"module": {n}}}')]),
                Message.tool(f"{tool}{n}", output.replace("_", f"_{n}_", 1))])
        cm.prepare()


def _scenarios(telemetry: Callable[[], Any]) -> list[Any]:
    """Sessions whose cache decisions cover every kind: waits, pays, forced, replaces the forced one, soft, widen,
    narrow, the cache expired. Returns their sinks."""
    sinks = []

    def session(name: str, **policy: object) -> tuple[ContextManager, Callable[[timedelta], None]]:
        sinks.append(telemetry())
        return _session(sinks[-1], name, **policy)

    cm, advance = session("claude", cache_pricing="claude-sonnet-4")
    _turns(cm, advance, 20)
    cm, advance = session("openai")
    _turns(cm, advance, 16)
    cm, advance = session("soft", cache_pricing="claude-sonnet-4", keep_tool_io_pairs=9, keep_recent_turns=2)
    _turns(cm, advance, 14)
    cm, advance = session("deep", cache_pricing="claude-sonnet-4")
    _turns(cm, advance, 6)
    _turns(cm, advance, 10, SMALL)
    cm, advance = session("wide", cache_pricing="claude-sonnet-4", soft_pct=0.8)
    _turns(cm, advance, 4, LISTING, tool="view")
    cm, advance = session("idle", cache_pricing="claude-sonnet-4")
    _turns(cm, advance, 9)
    _turns(cm, advance, 1, idle=timedelta(minutes=6))  # (past the cache's 5-minute lifetime)
    return sinks


def _decisions(records: list[dict[str, Any]]) -> list[str]:
    return [json.dumps({k: v for k, v in r.items() if k not in RANDOM_FIELDS})
            for r in records if r["name"] == "compact.cache_decision"]


def _exported() -> list[str]:
    """The cache decisions the sessions export through a processor (built on its thread), as JSON lines."""
    return [line for records in exported_per_session(_scenarios) for line in _decisions(records)]


def test_the_exported_cache_decisions_are_those_9466d5b_exported() -> None:
    golden = json.loads(GOLDEN.read_text())
    exported = _exported()
    assert exported == golden
    kinds = {(d["data"]["action"], d["data"]["applied"], d["data"]["forced"], d["data"]["replaces_forced"],
              "expired" in d["data"]["reason"]) for d in map(json.loads, golden)}
    assert {("mask", False, False, False, False), ("mask", True, False, False, False), ("mask", True, True, False,
            False), ("mask", True, False, True, False), ("soft", False, False, False, False), ("narrow", False,
            False, False, False), ("widen", False, False, False, False), ("mask", True, False, False, True)} <= kinds


def test_a_sink_that_builds_at_once_gets_the_same_decisions() -> None:
    records = [e.to_dict() for sink in _scenarios(RecordingTelemetry) for e in sink.events]
    assert _decisions(records) == json.loads(GOLDEN.read_text())


def test_a_turn_does_not_write_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 9466d5b: the agent's thread wrote each verdict's reason as it decided.
    agent = threading.get_ident()
    in_turn = [False]
    written_in_turn: list[bool] = []
    reason = RewriteVerdict.reason

    def noted(verdict: RewriteVerdict) -> str:
        written_in_turn.append(in_turn[0] and threading.get_ident() == agent)
        return reason(verdict)

    monkeypatch.setattr(RewriteVerdict, "reason", noted)
    made = BatchProcessor(InMemoryExporter())
    try:
        cm, advance = _session(made, "thread", cache_pricing="claude-sonnet-4")
        in_turn[0] = True
        _turns(cm, advance, 12)
        in_turn[0] = False
        assert made.flush()
        exported = _decisions(made.exporter.events)  # type: ignore[attr-defined]
    finally:
        made.shutdown()
    assert written_in_turn and not any(written_in_turn)
    weighed = [d for d in exported if '"reason": "mask: rewrite ' in d]  # (a forced one has a fixed reason)
    assert weighed and len(written_in_turn) == len(weighed)


if __name__ == "__main__":  # the golden file, from the tree on the path
    json.dump(_exported(), sys.stdout, indent=0)
    sys.stdout.write("\n")
