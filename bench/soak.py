"""Soak: many agent sessions with random tool-output sizes and random faults, checked end to end.

Faults: the summarizer fails, the tool output store fails, the provider reports a context overflow, and the
process is killed mid-session (the manager is dropped without close; a new one resumes from the archive plus the
agent's own log of what it added since). Every request is validated against the OpenAI Chat wire format and the
window; at the end the archive plus the final view must hold every message the agent added.

Reports: sessions completed, invalid requests, messages lost, compactions per session, and compactions on
consecutive turns without growth (the view grew by less than ``clear_at_least`` tokens in between).
Target: 100% completed, 0 invalid, 0 lost, 0 back-to-back without growth.

Run: python bench/soak.py [--sessions 1000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.errors import ContextfoldError, StoreError, SummarizerError
from contextfold.formats import get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore
from contextfold.summarize.base import SummaryRequest, SummaryResult
from contextfold.summarize.extractive import ExtractiveSummarizer

WINDOW = 16_000
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


@dataclass
class Outcome:
    completed: bool = False
    invalid: int = 0
    lost: int = 0
    compactions: int = 0
    back_to_back_without_growth: int = 0
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
    wire = get_format("openai_chat")
    log: list[Message] = []

    def new_manager() -> ContextManager:
        return ContextManager("gpt-4o", max_context_tokens=WINDOW, store=store, archive=archive, session_id=sid,
                              summarizer=summarizer, redact=False, policy={"circuit_cooldown_s": cooldown_s})

    cm = new_manager()
    last_compaction_tokens: int | None = None
    compactions_before = 0
    try:
        for turn in range(n_turns):
            if turn == kill_at:  # killed: nothing flushed, nothing closed; resume from the archive and the log
                outcome.kills += 1
                outcome.compactions += cm.compactions
                cm = new_manager()
                restored = archive.restore_history(sid, resolve_ref=store_get(store), keep_meta=(AGENT_ID,))
                known = {m.meta.get(AGENT_ID) for m in restored}
                retry(lambda r=restored, k=known: cm.add([*r, *(m for m in log if m.meta.get(AGENT_ID) not in k)]),
                      outcome)
                last_compaction_tokens, compactions_before = None, 0
            batch = turn_messages(rng, sid, turn)
            log.extend(batch)
            retry(lambda b=batch: cm.add(b), outcome)
            grown_to = cm.tokens()
            if rng.random() < 0.05:  # the provider says the request was too long
                outcome.faults["overflow"] = outcome.faults.get("overflow", 0) + 1
                outcome.faults[f"_overflow{turn}"] = 1
                retry(lambda: cm.shrink_for_overflow(prompt_tokens=cm.tokens() + WINDOW // 2, limit=WINDOW),
                      outcome)
            request = retry(lambda: cm.prepare("openai_chat"), outcome)
            try:
                wire.validate(request)
            except ContextfoldError as exc:
                outcome.invalid += 1
                outcome.error = outcome.error or f"invalid request: {exc}"
            if cm.tokens() > WINDOW:
                outcome.invalid += 1
                outcome.error = outcome.error or f"request of {cm.tokens()} tokens over the {WINDOW} window"
            if cm.compactions > compactions_before:
                tokens = cm.tokens()
                # A compaction forced by a reported overflow (with the provider's larger count) is not a loop.
                forced = any(outcome.faults.get(f"_overflow{t}") for t in (turn - 1, turn))
                if last_compaction_tokens is not None and turn_compacted_before(outcome, turn - 1) and not forced:
                    grown = grown_to - last_compaction_tokens
                    if grown < cm.policy.clear_at_least:
                        outcome.back_to_back_without_growth += 1
                last_compaction_tokens = tokens
                outcome.faults.setdefault("_compacted_turns", 0)
                mark_compacted(outcome, turn)
            compactions_before = cm.compactions
        cm.finish()
        outcome.compactions += cm.compactions
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


# Per-turn bookkeeping for the growth check, kept on the outcome (one dict per session).
def mark_compacted(outcome: Outcome, turn: int) -> None:
    outcome.faults[f"_turn{turn}"] = 1


def turn_compacted_before(outcome: Outcome, turn: int) -> bool:
    return outcome.faults.get(f"_turn{turn}", 0) == 1


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
            if not k.startswith("_"):
                faults[k] = faults.get(k, 0) + v
    return {
        "sessions": len(outcomes),
        "completed": completed,
        "completed_pct": round(100 * completed / max(1, len(outcomes)), 2),
        "invalid_requests": sum(o.invalid for o in outcomes),
        "messages_lost": sum(o.lost for o in outcomes),
        "compactions_per_session_median": statistics.median(compactions) if compactions else 0,
        "compactions_per_session_max": max(compactions, default=0),
        "back_to_back_without_growth": sum(o.back_to_back_without_growth for o in outcomes),
        "kills_resumed": sum(o.kills for o in outcomes),
        "faults_injected": faults,
        "errors": sorted({o.error for o in outcomes if o.error})[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cooldown", type=float, default=TURN_COOLDOWN_S,
                        help="circuit breaker cool-down in seconds (default: half-open on the next turn)")
    args = parser.parse_args()
    started = time.perf_counter()
    outcomes = [run_session(args.seed * 1_000_003 + n, cooldown_s=args.cooldown) for n in range(args.sessions)]
    report = summarize(outcomes)
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
