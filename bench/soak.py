"""Soak: many agent sessions with random tool-output sizes and random faults, checked end to end.

Faults: the summarizer fails, the tool output store fails, the provider reports a context overflow, and the
process is killed mid-session (the manager is dropped without close; a new one resumes from the archive plus the
agent's own log of what it added since). Every request is validated against the OpenAI Chat wire format and the
window; at the end the archive plus the final view must hold every message the agent added.

Sessions come in two shapes, at 8K or 16K: an agent's tool loop (a request now and then, a call, an output of
random size) and a user-heavy chat (300-word requests and replies, no tools).

Reports: sessions completed, invalid requests, messages lost, compactions per session (per shape), and automatic
compactions without growth: the view grew by less than the headroom a compaction leaves under hard
(``clear_at_least``, or half of hard - soft in small windows) since the compaction before it, on any earlier turn.
Read from the compactions' own figures (the span of each), not from the view after ``prepare()``, which an answered
output shown wider inflates. Before issue 21 it counted only compactions on consecutive turns, and only tool loops
at 16K ran: it said 0 while a user-heavy chat at 8K compacted on 14 of 30 turns.
Target: 100% completed, 0 invalid, 0 lost, 0 without growth.

Run: python bench/soak.py [--sessions 1000] [--seed 1]
     python bench/soak.py --long 1500   (one tool loop of 1,500 turns at 8K, no faults: compactions and maskings)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.cache import BlobStore
from contextfold.errors import ContextfoldError, StoreError, SummarizerError
from contextfold.formats import get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore
from contextfold.summarize.base import SummaryRequest, SummaryResult
from contextfold.summarize.extractive import ExtractiveSummarizer
from contextfold.telemetry import RecordingTelemetry, SpanEvent

WINDOW = 16_000
# Windows a session draws from: a small one, where every layer of the view competes for room, and the default.
WINDOWS = (8_000, WINDOW)
# Share of sessions that are user-heavy chats rather than tool loops.
CHAT_SHARE = 0.3
# Words per request and per reply in a user-heavy chat.
CHAT_WORDS = 300
_CHAT_VOCABULARY = ("alpha", "beta", "gamma", "delta", "epsilon", "river", "mountain", "table", "window",
                    "garden", "silver", "copper", "invoice", "customer", "order", "ticket")
# The agent's own id for each message it adds (a caller meta key, which the archive gives back on restore).
AGENT_ID = "agent_id"
# A turn here takes milliseconds, in production seconds (a model call): the circuit breaker's cool-down, counted in
# seconds, is set so that it half-opens after one turn, as it would in a real session (--cooldown to change it).
TURN_COOLDOWN_S = 0.0
# Each operation is retried this often when a fault makes it fail (faults are transient, as in production; one
# add() writes an output, its index and a claim, so at a 10% write failure rate a few attempts can fail in a row).
RETRIES = 8


class FlakySummarizer:
    """The extractive summarizer, failing with probability ``rate``."""

    name = "flaky"

    def __init__(self, rng: random.Random, rate: float) -> None:
        self.rng, self.rate, self.inner = rng, rate, ExtractiveSummarizer()
        self.failures = 0

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.rng.random() < self.rate:
            self.failures += 1
            raise SummarizerError("injected: the summarizer model timed out")
        return self.inner.summarize(request)


class FlakyStore(MemoryBlobStore):
    """A memory blob store whose writes fail with probability ``rate``."""

    def __init__(self, rng: random.Random, rate: float) -> None:
        super().__init__()
        self.rng, self.rate = rng, rate
        self.failures = 0

    def put(self, key: str, data: bytes) -> None:
        if self.rng.random() < self.rate:
            self.failures += 1
            raise StoreError("injected: the store is unavailable")
        super().put(key, data)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        # One put each (the protocol's default): each write may fail, as before the batch (an output without its claim).
        BlobStore.put_many(self, items)


@dataclass
class Outcome:
    completed: bool = False
    invalid: int = 0
    lost: int = 0
    shape: str = "tool"
    compactions: int = 0
    without_growth: int = 0
    kills: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    error: str | None = None


def tool_output(rng: random.Random, turn: int) -> str:
    size = int(min(300_000, rng.lognormvariate(7.5, 1.6)))  # median ~1.8 KB, a long tail past 100 KB
    line = f"turn {turn}: " + "".join(rng.choices("abcdefghij ", k=70))
    return "\n".join(line for _ in range(max(1, size // 80)))


def turn_messages(rng: random.Random, sid: str, turn: int) -> list[Message]:
    call = ToolCall(f"c{turn}", "bash", json.dumps({"cmd": f"step {turn}"}))
    ids = iter(f"{sid}-{turn}-{k}" for k in range(4))
    out = []
    if turn == 0 or rng.random() < 0.3:
        out.append(Message.user(f"request {turn}: please continue with part {rng.randint(1, 99)}",
                                meta={AGENT_ID: next(ids)}))
    out += [Message.assistant(f"running step {turn}", [call], meta={AGENT_ID: next(ids)}),
            Message.tool(call.id, tool_output(rng, turn), name="bash", meta={AGENT_ID: next(ids)}),
            Message.assistant(f"step {turn} done", meta={AGENT_ID: next(ids)})]
    return out


def chat_messages(rng: random.Random, sid: str, turn: int) -> list[Message]:
    """One turn of a user-heavy chat: a long request and a long reply."""
    ids = iter(f"{sid}-{turn}-{k}" for k in range(2))

    def words() -> str:
        return " ".join(rng.choice(_CHAT_VOCABULARY) for _ in range(CHAT_WORDS))

    return [Message.user(f"request {turn}: {words()}", meta={AGENT_ID: next(ids)}),
            Message.assistant(f"reply {turn}: {words()}", meta={AGENT_ID: next(ids)})]


def compactions_without_growth(telemetry: RecordingTelemetry, headroom: int) -> int:
    """Automatic compactions the view reached growing less than ``headroom`` since the compaction before it."""
    count = 0
    last_after: int | None = None
    for e in telemetry.events:
        if not (isinstance(e, SpanEvent) and e.event.startswith("compact.") and e.attributes.get("applied")):
            continue
        before, after = int(e.attributes["tokens_before"]), int(e.attributes["tokens_after"])
        # Overflow recovery's compactions (not automatic) answer the provider's count, not growth.
        if e.attributes.get("automatic") and last_after is not None and before - last_after < headroom:
            count += 1
        last_after = after
    return count


def headroom(cm: ContextManager) -> int:
    """What a hard compaction leaves under hard at least (``Compactor.headroom``)."""
    return min(cm.policy.clear_at_least, (cm.budgets.hard - cm.budgets.soft) // 2)


def retry(fn: Any, outcome: Outcome) -> Any:
    for attempt in range(RETRIES):
        try:
            return fn()
        except (StoreError, SummarizerError) as exc:
            kind = type(exc).__name__
            outcome.faults[kind] = outcome.faults.get(kind, 0) + 1
            if attempt == RETRIES - 1:
                raise
    return None


def run_session(seed: int, *, turns: int | None = None, cooldown_s: float = TURN_COOLDOWN_S) -> Outcome:
    rng = random.Random(seed)
    sid = f"soak-{seed}"
    outcome = Outcome()
    archive = Archive(MemoryArchiveStore())
    store = FlakyStore(rng, rate=rng.choice([0.0, 0.02, 0.1]))
    summarizer = FlakySummarizer(rng, rate=rng.choice([0.0, 0.1, 0.3]))
    n_turns = turns or rng.randint(20, 60)
    kill_at = rng.randrange(n_turns) if rng.random() < 0.3 else -1
    window = rng.choice(WINDOWS)
    outcome.shape = "chat" if rng.random() < CHAT_SHARE else "tool"
    make_turn = chat_messages if outcome.shape == "chat" else turn_messages
    wire = get_format("openai_chat")
    log: list[Message] = []

    telemetry = RecordingTelemetry()

    def new_manager() -> ContextManager:
        telemetry.clear()  # a resumed manager's compactions are measured from its own first one
        return ContextManager("gpt-4o", max_context_tokens=window, store=store, archive=archive, session_id=sid,
                              summarizer=summarizer, redact=False, policy={"circuit_cooldown_s": cooldown_s},
                              telemetry=telemetry)

    def count_growth(manager: ContextManager) -> None:
        outcome.without_growth += compactions_without_growth(telemetry, headroom(manager))

    cm = new_manager()
    try:
        for turn in range(n_turns):
            if turn == kill_at:  # killed: nothing flushed, nothing closed; resume from the archive and the log
                outcome.kills += 1
                outcome.compactions += cm.compactions
                count_growth(cm)
                cm = new_manager()
                restored = archive.restore_history(sid, resolve_ref=store_get(store), keep_meta=(AGENT_ID,))
                known = {m.meta.get(AGENT_ID) for m in restored}
                retry(lambda r=restored, k=known: cm.add([*r, *(m for m in log if m.meta.get(AGENT_ID) not in k)]),
                      outcome)
            batch = make_turn(rng, sid, turn)
            log.extend(batch)
            retry(lambda b=batch: cm.add(b), outcome)
            if rng.random() < 0.05:  # the provider says the request was too long
                outcome.faults["overflow"] = outcome.faults.get("overflow", 0) + 1
                retry(lambda: cm.shrink_for_overflow(prompt_tokens=cm.tokens() + window // 2, limit=window),
                      outcome)
            request = retry(lambda: cm.prepare("openai_chat"), outcome)
            try:
                wire.validate(request)
            except ContextfoldError as exc:
                outcome.invalid += 1
                outcome.error = outcome.error or f"invalid request: {exc}"
            if cm.tokens() > window:
                outcome.invalid += 1
                outcome.error = outcome.error or f"request of {cm.tokens()} tokens over the {window} window"
        cm.finish()
        outcome.compactions += cm.compactions
        count_growth(cm)
        restored = archive.restore_history(sid, cm.messages(), resolve_ref=store_get(store), keep_meta=(AGENT_ID,))
        have = {(m.meta.get(AGENT_ID), m.text) for m in restored}
        # Lost: not in archive + view with its id and its full text, byte for byte.
        outcome.lost = sum(1 for m in log if (m.meta.get(AGENT_ID), m.text) not in have)
        outcome.completed = True
    except Exception as exc:  # a soak reports failures, it does not stop at the first
        outcome.error = f"{type(exc).__name__}: {exc}"
    finally:
        cm.close()
    outcome.faults["summarizer"] = summarizer.failures
    outcome.faults["store"] = store.failures
    return outcome


def store_get(store: MemoryBlobStore) -> Any:
    def get(ref: str) -> str:
        return store.get(ref).decode("utf-8", "surrogatepass")
    return get


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    completed = sum(o.completed for o in outcomes)
    compactions = [o.compactions for o in outcomes]
    faults: dict[str, int] = {}
    for o in outcomes:
        for k, v in o.faults.items():
            faults[k] = faults.get(k, 0) + v
    by_shape = {shape: [o.compactions for o in outcomes if o.shape == shape] for shape in ("tool", "chat")}
    return {
        "sessions": len(outcomes),
        "completed": completed,
        "completed_pct": round(100 * completed / max(1, len(outcomes)), 2),
        "invalid_requests": sum(o.invalid for o in outcomes),
        "messages_lost": sum(o.lost for o in outcomes),
        "compactions_per_session_median": statistics.median(compactions) if compactions else 0,
        "compactions_per_session_max": max(compactions, default=0),
        "compactions_per_session_by_shape": {shape: {"sessions": len(found), "median": statistics.median(found),
                                                     "max": max(found)}
                                             for shape, found in by_shape.items() if found},
        "compactions_without_growth": sum(o.without_growth for o in outcomes),
        "kills_resumed": sum(o.kills for o in outcomes),
        "faults_injected": faults,
        "errors": sorted({o.error for o in outcomes if o.error})[:5],
    }


def long_session(turns: int, *, seed: int = 1, window: int = 8_000) -> dict[str, Any]:
    """One tool loop of ``turns`` turns, no faults: how often it compacts and masks, and how the view ends."""
    rng = random.Random(seed)
    telemetry = RecordingTelemetry()
    cm = ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive="memory", session_id="long",
                        redact=False, telemetry=telemetry)
    started = time.process_time()
    for turn in range(turns):
        cm.add(turn_messages(rng, "long", turn))
        cm.prepare("openai_chat")
    report = {"turns": turns, "window": window, "compactions": cm.compactions, "maskings": cm.maskings,
              "compactions_without_growth": compactions_without_growth(telemetry, headroom(cm)),
              "final_view_messages": len(cm.messages()), "final_view_tokens": cm.tokens(),
              "cpu_seconds": round(time.process_time() - started, 1)}
    cm.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cooldown", type=float, default=TURN_COOLDOWN_S,
                        help="circuit breaker cool-down in seconds (default: half-open on the next turn)")
    parser.add_argument("--long", type=int, default=0, metavar="TURNS",
                        help="run one fault-free tool loop of this many turns at 8K instead")
    args = parser.parse_args()
    if args.long:
        print(json.dumps(long_session(args.long, seed=args.seed), indent=2))
        return
    started = time.perf_counter()
    outcomes = [run_session(args.seed * 1_000_003 + n, cooldown_s=args.cooldown) for n in range(args.sessions)]
    report = summarize(outcomes)
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
