"""Telemetry latency: emit-to-receipt through BatchProcessor + AriadneExporter, and the cost of emit() itself.

Run: ``python bench/bench_telemetry.py [--events 1000] [--rounds 5]``. Starts an /ingest server on 127.0.0.1
in a separate process (as Ariadne is),
fires bursts of events from the "agent" thread through a Tracer, and prints:

- p50 / p95 / max from the emit() call to the server having the event (target: p95 < 200 ms);
- p50 / p99 / max duration of one Tracer.emit() call on the agent thread (target: max < 1 ms);
- the same emit() figures against a stalled server with a small queue (the drop path).

``--noop [--baseline SRC]`` instead measures the telemetry thread's work for no-op ``prepare()`` calls (issue 22): a
manager as ``bench_prepare.py`` makes it (archive in memory: its events file's processor, redacted by the session's
redactor), 100 messages, its processor's thread held while ``--calls`` calls queue their events, then the processor's
export of them timed on this thread (build, dicts, redaction, the events file's lines), thread CPU per call. Each tree
runs in fresh interpreters, alternating with ``--baseline``'s (another ``src``) run by run; prints the median and the
minimum of ``--rounds`` rounds per run, pooled over ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from contextfold.exporters.ariadne import AriadneExporter
from contextfold.telemetry import BatchProcessor, CompactWarning, Tracer


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.received: dict[str, int] = {}
        self.stall = threading.Event()
        self.release = threading.Event()
        self.all_in = threading.Event()
        self.expected = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Receiver

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        # CLOCK_MONOTONIC is system-wide on Linux, so this compares with the agent process's perf_counter_ns.
        now = time.perf_counter_ns()
        if self.server.stall.is_set():
            self.server.release.wait(30)
        batch = json.loads(body)["batch"]
        with self.server.lock:
            for span in batch:
                self.server.received.setdefault(span["data"]["message"], now)
            if len(self.server.received) >= self.server.expected:
                self.server.all_in.set()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def serve(conn: Connection) -> None:
    """The receiver runs in its own process, as Ariadne would: its JSON parsing must not share our GIL."""
    server = Receiver()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    conn.send(server.server_address[1])
    while True:
        command, arg = conn.recv()
        if command == "expect":
            with server.lock:
                server.received.clear()
                server.expected = arg
                server.all_in.clear()
            conn.send(None)
        elif command == "collect":
            ok = server.all_in.wait(30)
            with server.lock:
                conn.send(dict(server.received) if ok else None)
        elif command == "stall":
            server.release.clear()
            server.stall.set()
            conn.send(None)
        elif command == "release":
            server.stall.clear()
            server.release.set()
            conn.send(None)
        else:
            server.shutdown()
            conn.send(None)
            return


class Remote:
    def __init__(self) -> None:
        self.conn, child = multiprocessing.Pipe()
        self.process = multiprocessing.get_context("spawn").Process(target=serve, args=(child,), daemon=True)
        self.process.start()
        self.url = f"http://127.0.0.1:{self.conn.recv()}"

    def call(self, command: str, arg: Any = None) -> Any:
        self.conn.send((command, arg))
        return self.conn.recv()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def burst(remote: Remote, events: int, round_no: int) -> tuple[list[float], list[float]]:
    processor = BatchProcessor(AriadneExporter(remote.url), max_queue=events * 2)
    tracer = Tracer(f"bench-{round_no}", processor)
    remote.call("expect", events)
    sent_at: dict[str, int] = {}
    emit_ns: list[float] = []
    for i in range(events):
        key = f"{round_no}-{i}"
        start = time.perf_counter_ns()
        tracer.emit(CompactWarning(message=key, code="bench"))
        end = time.perf_counter_ns()
        sent_at[key] = start
        emit_ns.append(end - start)
    received = remote.call("collect")
    assert received is not None, "not every event arrived"
    processor.shutdown()
    latency_ms = [(received[k] - t) / 1e6 for k, t in sent_at.items()]
    return latency_ms, [ns / 1e3 for ns in emit_ns]


def stalled(remote: Remote, events: int) -> tuple[list[float], int]:
    remote.call("stall")
    processor = BatchProcessor(AriadneExporter(remote.url), max_queue=64)
    tracer = Tracer("bench-stalled", processor)
    emit_us: list[float] = []
    for i in range(events):
        start = time.perf_counter_ns()
        tracer.emit(CompactWarning(message=f"stalled-{i}"))
        emit_us.append((time.perf_counter_ns() - start) / 1e3)
    dropped = processor.dropped
    remote.call("release")
    processor.shutdown()
    return emit_us, dropped


def null_sink(events: int) -> list[float]:
    tracer = Tracer("bench-null")
    emit_us: list[float] = []
    for i in range(events):
        start = time.perf_counter_ns()
        tracer.emit(CompactWarning(message=f"null-{i}"))
        emit_us.append((time.perf_counter_ns() - start) / 1e3)
    return emit_us


def noop_child(calls: int, rounds: int) -> None:
    """In this interpreter (the tree on PYTHONPATH): the processor's CPU per no-op call, per round, as one JSON line."""
    import contextfold

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_prepare

    rng = random.Random(0)
    cm = bench_prepare.manager()
    cm.add([bench_prepare.message(i, rng) for i in range(100)])
    cm.prepare(format="openai_chat")
    cm.tokens()
    processor: Any = getattr(cm.tracer.telemetry, "sinks")[-1]  # (the archive's events file's)
    processor.flush()  # (the first batch loads the redaction rules: not measured)
    processor._worker.schedule = lambda *_, **__: None  # (the thread is held: the calls' events wait in the queue)
    figures: list[float] = []
    at = 100
    for _ in range(rounds + 1):
        for _ in range(calls):
            cm.add(bench_prepare.message(at, rng))
            at += 1
            cm.prepare(format="openai_chat")
        events = len(processor._queue)
        gc.collect()
        start = time.thread_time()
        processor._drain()
        figures.append((time.thread_time() - start) * 1e6 / calls)
    print(json.dumps({"source": str(Path(contextfold.__file__).parent), "us_per_call": figures[1:],
                      "events_per_call": events / calls}))


def noop(args: argparse.Namespace) -> None:
    here = Path(__file__).resolve()
    trees = [("this tree", str(here.parent.parent / "src"))] + ([("base", args.baseline)] if args.baseline else [])
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; the telemetry thread's work per "
          f"no-op prepare() at 100 messages, {args.calls} calls a round, {args.rounds} rounds a run, {args.runs} runs")
    pooled: dict[str, list[float]] = {}
    for run in range(args.runs):
        for label, src in trees if run % 2 == 0 else trees[::-1]:
            done = subprocess.run([sys.executable, str(here), "--noop-child", "--calls", str(args.calls), "--rounds",
                                   str(args.rounds)], capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": src})
            if done.returncode != 0:
                raise SystemExit(f"{src} failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            if Path(result["source"]).resolve() != (Path(src) / "contextfold").resolve():
                raise SystemExit(f"the child imported {result['source']}, not the tree under {src}")
            pooled.setdefault(label, []).extend(result["us_per_call"])
    for label, figures in pooled.items():
        print(f"{label:<9}: {statistics.median(figures):6.1f} us a call (min {min(figures):.1f}, "
              f"max {max(figures):.1f}) over {len(figures)} rounds")
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--noop", action="store_true", help="the telemetry thread's work per no-op prepare()")
    parser.add_argument("--noop-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", default=None, help="with --noop: another src directory, in the same run")
    parser.add_argument("--calls", type=int, default=500, help="with --noop: calls per round")
    parser.add_argument("--runs", type=int, default=5, help="with --noop: fresh interpreters per tree")
    args = parser.parse_args()
    if args.noop_child:
        noop_child(args.calls, args.rounds)
        return
    if args.noop:
        noop(args)
        return

    remote = Remote()
    print(f"{args.rounds} bursts of {args.events} events, BatchProcessor -> AriadneExporter -> 127.0.0.1")
    print(f"{'round':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} | {'emit p50 us':>11} {'p99 us':>8} {'max us':>8}")
    all_lat: list[float] = []
    all_emit: list[float] = []
    for r in range(args.rounds):
        gc.collect()
        lat, emit = burst(remote, args.events, r)
        all_lat += lat
        all_emit += emit
        print(
            f"{r:>5} {pct(lat, 0.5):8.1f} {pct(lat, 0.95):8.1f} {max(lat):8.1f} | "
            f"{statistics.median(emit):11.1f} {pct(emit, 0.99):8.1f} {max(emit):8.1f}"
        )
    print(
        f"{'all':>5} {pct(all_lat, 0.5):8.1f} {pct(all_lat, 0.95):8.1f} {max(all_lat):8.1f} | "
        f"{statistics.median(all_emit):11.1f} {pct(all_emit, 0.99):8.1f} {max(all_emit):8.1f}"
    )
    baseline = null_sink(args.events * args.rounds)
    print(
        "baseline, Tracer -> NullTelemetry (machine noise, no processor): "
        f"emit p50 {statistics.median(baseline):.1f} us, "
        f"p99 {pct(baseline, 0.99):.1f} us, max {max(baseline):.1f} us"
    )
    emit_stalled, dropped = stalled(remote, args.events)
    print(
        f"stalled server, queue 64: {dropped}/{args.events} dropped; "
        f"emit p50 {statistics.median(emit_stalled):.1f} us, p99 {pct(emit_stalled, 0.99):.1f} us, "
        f"max {max(emit_stalled):.1f} us"
    )
    remote.call("stop")
    remote.process.join(10)


if __name__ == "__main__":
    main()
