"""A fleet run for real: worker processes, one ``redis-server``, one ``moto_server``, recorded sessions, kills.

:func:`run_fleet` starts W worker processes that share one Redis (sessions, tool output cache, the queue of
background compactions) and one S3 server (the archive), and drives S sessions of recorded turns through them:
each session's next turn goes to a random worker once the previous one is answered, and now and then a random
worker is SIGKILLed and started again (its unanswered turns go to other workers). Workers take background soft
compactions from the queue whenever their inbox is empty. After the run, every session's stored view is archived
and the session restored from the archive alone is compared with what was sent to the fleet.

``bench/fleet.py`` runs it at scale and prints the figures; ``tests/fleet/`` runs a small one.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..archive import BOOKKEEPING_META, Archive
from ..formats import get_format
from ..messages import Message, freeze
from ..serialize import message_from_dict, message_to_dict
from .services import MotoServer, RedisServer

__all__ = ["FleetConfig", "FleetReport", "recorded_turns", "run_fleet", "split_turns"]

_BUCKET = "contextfold-fleet"
_DONE = "fleet:done"
_COMPACTIONS = "fleet:compactions"
# How long a worker waits on its inbox before looking at the compaction queue (and the driver on results).
_POLL_S = 0.05


@dataclass(frozen=True)
class FleetConfig:
    """What to run.

    Attributes:
        workers: Worker processes (W).
        sessions: Sessions driven through them (S), recorded sessions reused round-robin when S is larger.
        data: A recorded-session file or folder (see :func:`contextfold.importers.load_sessions`).
        window: The context window the workers manage, small enough that sessions get compacted.
        kill_every: SIGKILL a random worker after this many answered turns (0: never).
        max_turns: Use at most this many turns of each recorded session (0: all).
        seed: Seeds the choice of workers and victims.
        format: The wire format of the views.
    """

    workers: int = 8
    sessions: int = 500
    data: str = ""
    window: int = 8_000
    kill_every: int = 250
    max_turns: int = 0
    seed: int = 0
    format: str = "openai_chat"


@dataclass
class FleetReport:
    """Figures of a run (times in milliseconds)."""

    workers: int = 0
    sessions: int = 0
    turns: int = 0
    seconds: float = 0.0
    prepare_ms: list[float] = field(default_factory=list)
    turn_ms: list[float] = field(default_factory=list)
    conflicts: int = 0
    retries: int = 0
    store_errors: int = 0
    duplicates: int = 0
    kills: int = 0
    redispatched: int = 0
    compactions_applied: int = 0
    compactions_discarded: int = 0
    compactions_empty: int = 0
    invalid_views: int = 0
    views: int = 0
    verified: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    mismatched: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def turns_per_second(self) -> float:
        """Answered turns per second of the run."""
        return self.turns / self.seconds if self.seconds else 0.0

    @staticmethod
    def percentile(values: Sequence[float], q: float) -> float:
        """The ``q`` quantile of ``values`` (0 when empty)."""
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    def lines(self) -> list[str]:
        """The figures, one per line."""
        p = self.percentile
        return [
            f"workers W = {self.workers}, sessions S = {self.sessions}, turns = {self.turns} in {self.seconds:.1f} s "
            f"= {self.turns_per_second:.1f} turns/s",
            f"prepare() through Redis: p50 {p(self.prepare_ms, 0.5):.2f} ms, p99 {p(self.prepare_ms, 0.99):.2f} ms; "
            f"whole turn (load, add, prepare, save): p50 {p(self.turn_ms, 0.5):.1f} ms, "
            f"p99 {p(self.turn_ms, 0.99):.1f} ms",
            f"optimistic-concurrency conflicts = {self.conflicts}, retried attempts = {self.retries} "
            f"(store errors {self.store_errors}), turns answered twice after a kill = {self.duplicates}",
            f"kills = {self.kills}, turns re-dispatched = {self.redispatched}",
            f"background compactions: applied = {self.compactions_applied}, discarded (session moved on) = "
            f"{self.compactions_discarded}, nothing to do = {self.compactions_empty}",
            f"views sent = {self.views}, invalid = {self.invalid_views}",
            f"sessions verified = {self.verified} of {self.sessions}: lost = {self.lost}, duplicated = "
            f"{self.duplicated}, out of order = {self.out_of_order}, other differences = {self.mismatched}",
        ]


def split_turns(messages: Sequence[Message]) -> list[tuple[list[Message], list[Message]]]:
    """A recorded conversation as turns: (input messages, the assistant reply that answered them)."""
    turns: list[tuple[list[Message], list[Message]]] = []
    inputs: list[Message] = []
    for m in messages:
        if m.role == "assistant":
            turns.append((inputs, [m]))
            inputs = []
        else:
            inputs.append(m)
    if inputs:
        turns.append((inputs, []))
    return turns


def recorded_turns(config: FleetConfig) -> dict[str, list[tuple[list[Message], list[Message]]]]:
    """S sessions of recorded turns, every message with a stable id (``<session>:<n>``)."""
    from ..importers._files import load_sessions

    recorded = [s for s in load_sessions(config.data) if len(s.messages) >= 2]
    if not recorded:
        raise ValueError(f"data: no recorded session in {config.data!r}")
    out: dict[str, list[tuple[list[Message], list[Message]]]] = {}
    for i in range(config.sessions):
        session_id = f"f{i:05d}"
        turns = split_turns(recorded[i % len(recorded)].messages)
        if config.max_turns:
            turns = turns[: config.max_turns]
        n = 0
        numbered: list[tuple[list[Message], list[Message]]] = []
        for inputs, reply in turns:
            ids: list[list[Message]] = []
            for group in (inputs, reply):
                stamped = []
                for m in group:
                    n += 1
                    stamped.append(m.with_meta(id=f"{session_id}:{n}"))
                ids.append(stamped)
            numbered.append((ids[0], ids[1]))
        out[session_id] = numbered
    return out


# ---- the worker process ---------------------------------------------------------------------------------------------


def _stores(redis_url: str, s3_url: str) -> tuple[Any, Any, Archive, Any]:
    import boto3
    from botocore.config import Config

    from ..redact import Redactor
    from ..stores.archive_s3 import S3ArchiveStore
    from ..stores.redis_blob import RedisBlobStore
    from ..stores.redis_queue import RedisJobQueue
    from ..stores.redis_session import RedisSessionStore
    from .services import s3_environment

    env = s3_environment()
    client = boto3.client("s3", endpoint_url=s3_url, region_name=env["AWS_DEFAULT_REGION"],
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                          config=Config(s3={"addressing_style": "path"}))
    # Unredacted, so that the check after the run can compare restored sessions byte for byte.
    archive = Archive(S3ArchiveStore(_BUCKET, "archive", client=client), redactor=Redactor(enabled=False))
    return RedisSessionStore(redis_url), RedisBlobStore(redis_url), archive, RedisJobQueue(redis_url)


def _worker_main(index: int, redis_url: str, s3_url: str, window: int, fmt: str) -> None:
    import redis

    from ..fleet import FleetWorker, SessionEventsExporter
    from ..telemetry import BatchProcessor

    sessions, blobs, archive, queue = _stores(redis_url, s3_url)
    events = BatchProcessor(SessionEventsExporter(archive))
    worker = FleetWorker(sessions, blobs=blobs, archive=archive, max_context_tokens=window, telemetry=events,
                         format=fmt, redact=False)
    validate = get_format(fmt).validate
    client = redis.Redis.from_url(redis_url)
    inbox = f"fleet:inbox:{index}"
    while True:
        popped = client.blpop([inbox], timeout=_POLL_S)
        if popped is None:
            session_id = queue.take()
            if session_id is not None:
                outcome = worker.compact(session_id)
                client.rpush(_COMPACTIONS, json.dumps({"applied": outcome.applied, "discarded": outcome.discarded}))
            continue
        job = json.loads(popped[1])
        if job.get("stop"):
            events.shutdown()
            return
        inputs = [message_from_dict(d) for d in job["inputs"]]
        reply = [message_from_dict(d) for d in job["reply"]]
        result: dict[str, Any] = {"worker": index, "session": job["session"], "turn": job["turn"]}
        try:
            turn = worker.turn(job["session"], job["turn"], inputs, reply)
        except Exception as exc:  # reported to the driver, which counts it; the worker goes on
            result["error"] = f"{type(exc).__name__}: {exc}"
        else:
            valid = True
            if turn.view is not None:
                try:
                    validate(turn.view)
                except Exception:
                    valid = False
            if turn.soft_due:
                queue.offer(job["session"])
            result.update(duplicate=turn.duplicate, valid=valid, prepare_ms=turn.prepare_ms, turn_ms=turn.turn_ms,
                          attempts=turn.attempts, conflicts=turn.conflicts, store_errors=turn.store_errors)
        client.rpush(_DONE, json.dumps(result))


# ---- the driver ------------------------------------------------------------------------------------------------------


def run_fleet(config: FleetConfig, *, progress: Any = None) -> FleetReport:
    """Run the fleet described by ``config`` on fresh local servers and return its figures."""
    import redis

    rng = random.Random(config.seed)
    sessions = recorded_turns(config)
    report = FleetReport(workers=config.workers, sessions=config.sessions)
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as rs, MotoServer(_BUCKET) as s3:
        from ..stores.redis_queue import RedisJobQueue

        client = redis.Redis.from_url(rs.url)
        jobs = RedisJobQueue(rs.url)

        def start(index: int) -> Any:
            proc = context.Process(target=_worker_main, args=(index, rs.url, s3.url, config.window, config.format),
                                   daemon=True)
            proc.start()
            return proc

        procs = [start(i) for i in range(config.workers)]
        next_turn = dict.fromkeys(sessions, 0)
        outstanding: dict[str, tuple[int, int]] = {}  # session -> (worker, turn number)

        def dispatch(session_id: str) -> None:
            index = rng.randrange(config.workers)
            number = next_turn[session_id] + 1
            inputs, reply = sessions[session_id][number - 1]
            job = {"session": session_id, "turn": number, "inputs": [message_to_dict(m) for m in inputs],
                   "reply": [message_to_dict(m) for m in reply]}
            client.rpush(f"fleet:inbox:{index}", json.dumps(job))
            outstanding[session_id] = (index, number)

        started = time.perf_counter()
        try:
            for session_id in sessions:
                dispatch(session_id)
            answered = 0
            while outstanding:
                popped = client.blpop([_DONE], timeout=1)
                if popped is None:
                    continue
                result = json.loads(popped[1])
                session_id, number = result["session"], result["turn"]
                if outstanding.get(session_id, (None, None))[1] != number:
                    continue  # a late answer of a turn that was re-dispatched and answered already
                if "error" in result:
                    report.errors.append(f"{session_id} turn {number}: {result['error']}")
                    dispatch(session_id)  # same turn again, on another worker
                    continue
                del outstanding[session_id]
                report.turns += 1
                answered += 1
                report.duplicates += bool(result["duplicate"])
                if not result["duplicate"]:
                    report.views += 1
                    report.invalid_views += not result["valid"]
                    report.prepare_ms.append(result["prepare_ms"])
                report.turn_ms.append(result["turn_ms"])
                report.conflicts += result["conflicts"]
                report.retries += result["attempts"] - 1
                report.store_errors += result["store_errors"]
                next_turn[session_id] = number
                if number < len(sessions[session_id]):
                    dispatch(session_id)
                if config.kill_every and answered % config.kill_every == 0 and outstanding:
                    victim = rng.randrange(config.workers)
                    procs[victim].kill()
                    procs[victim].join()
                    report.kills += 1
                    client.delete(f"fleet:inbox:{victim}")
                    procs[victim] = start(victim)
                    for sid, (index, _) in list(outstanding.items()):
                        if index == victim:
                            report.redispatched += 1
                            dispatch(sid)
                if progress is not None and answered % 500 == 0:
                    progress(f"{answered} turns answered, {len(outstanding)} sessions in flight")
            # Let the background compactions queued by the last turns run, then stop the workers.
            # (the queue's own count: the key this read, NAME:list, went with s19's layout, so nothing was waited for)
            while len(jobs):
                client.blpop([_DONE], timeout=_POLL_S)
            report.seconds = time.perf_counter() - started
        finally:
            for index in range(config.workers):
                client.rpush(f"fleet:inbox:{index}", json.dumps({"stop": True}))
            for proc in procs:
                proc.join(timeout=30)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
        for raw in client.lrange(_COMPACTIONS, 0, -1):
            outcome = json.loads(raw)
            if outcome["applied"]:
                report.compactions_applied += 1
            elif outcome["discarded"]:
                report.compactions_discarded += 1
            else:
                report.compactions_empty += 1
        _verify(report, sessions, rs.url, s3.url, config)
        jobs.close()
        client.close()
    return report


def _strip(m: Message) -> Message:
    from dataclasses import replace

    meta = freeze({k: v for k, v in m.meta.items() if k not in BOOKKEEPING_META})
    return m if meta == m.meta else replace(m, meta=meta)


def _verify(report: FleetReport, sessions: dict[str, list[tuple[list[Message], list[Message]]]], redis_url: str,
            s3_url: str, config: FleetConfig) -> None:
    """Archive each session's final view, restore it from the archive alone, and compare with the original."""
    from ..fleet import FleetWorker

    stores, blobs, archive, _ = _stores(redis_url, s3_url)
    worker = FleetWorker(stores, blobs=blobs, archive=archive, max_context_tokens=config.window, redact=False)
    for session_id, turns in sessions.items():
        original = [m for inputs, reply in turns for m in (*inputs, *reply)]
        worker.finish(session_id)
        merged = archive.restore_history(session_id)  # ids kept: what is missing, repeated or moved
        ids = [str(m.meta.get("id")) for m in merged]
        want = [str(m.meta["id"]) for m in original]
        lost = len(set(want) - set(ids))
        duplicated = len(ids) - len(set(ids))
        seen = [i for i in ids if i in set(want)]
        out_of_order = int(seen != [i for i in want if i in set(seen)])
        restored = worker.restore(session_id, keep_meta=None)
        mismatched = int(not lost and not duplicated and not out_of_order
                         and restored != [_strip(m) for m in original])
        report.lost += lost
        report.duplicated += duplicated
        report.out_of_order += out_of_order
        report.mismatched += mismatched
        report.verified += not (lost or duplicated or out_of_order or mismatched)
