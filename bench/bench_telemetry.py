"""Telemetry latency: emit-to-receipt through BatchProcessor + AriadneExporter, and the cost of emit() itself.

Run: ``python bench/bench_telemetry.py [--events 1000] [--rounds 5]``. Starts an /ingest server on 127.0.0.1
in a separate process (as Ariadne is),
fires bursts of events from the "agent" thread through a Tracer, and prints:

- p50 / p95 / max from the emit() call to the server having the event (target: p95 < 200 ms);
- p50 / p99 / max duration of one Tracer.emit() call on the agent thread (target: max < 1 ms);
- the same emit() figures against a stalled server with a small queue (the drop path).
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

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
