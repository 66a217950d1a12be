"""The real Ariadne server (../shared/tools/ariadne-serve) and a reader of its SSE stream, for the trace tests."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import ROOT, require, require_binary

ARIADNE_SERVE = ROOT.parent / "shared" / "tools" / "ariadne-serve"
# The first start installs Ariadne's Node dependencies from npm (about a minute on a quiet machine).
START_TIMEOUT_S = 600
# How long a test waits for the events it sent to come back over the SSE stream.
STREAM_PATIENCE_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class AriadneServer:
    port: int
    pids: list[int]
    workdir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.port + 1}"

    def stop(self) -> None:
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.kill(pid, signal.SIGTERM)


def start_ariadne(*, web: bool = False, workdir: Path | None = None, port: int | None = None) -> AriadneServer:
    """Start Ariadne on ``port`` or a free one (and its web UI on the next one with ``web``); the caller stops it."""
    require(ARIADNE_SERVE.is_file(), f"ariadne-serve not found at {ARIADNE_SERVE}")
    require_binary("node")
    require_binary("npx")
    port = port or free_port()
    args = [str(ARIADNE_SERVE), str(port)]
    if workdir is not None:
        args.append(str(workdir))
    if web:
        args.append("--web")
    done = subprocess.run(args, capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"ariadne-serve failed: {done.stderr}"
    pids = [int(line) for line in done.stdout.split()]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ariadne-serve"
    return AriadneServer(port, pids, workdir or cache)


@dataclass
class SseReader:
    """Reads Ariadne's ``GET /events`` stream on a thread; ``wait_for`` blocks until enough events arrived."""

    port: int
    trace_id: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    connected: threading.Event = field(default_factory=threading.Event)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _conn: http.client.HTTPConnection | None = None

    def start(self) -> SseReader:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        assert self.connected.wait(STREAM_PATIENCE_S), "the SSE stream did not open"
        return self

    def _run(self) -> None:
        self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=STREAM_PATIENCE_S * 4)
        path = "/events" + (f"?traceId={self.trace_id}" if self.trace_id else "")
        self._conn.request("GET", path, headers={"Accept": "text/event-stream"})
        response = self._conn.getresponse()
        assert response.status == 200
        try:
            while True:
                line = response.readline()
                if not line:
                    return
                if not line.startswith(b"data: "):
                    continue
                payload = json.loads(line[len(b"data: "):])
                if payload.get("type") == "connected":
                    self.connected.set()
                    continue
                with self._cond:
                    self.events.append(payload)
                    self._cond.notify_all()
        except (OSError, ValueError):
            return  # closed by stop()

    def wait_for(self, done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        with self._cond:
            self._cond.wait_for(lambda: done(self.events), timeout=STREAM_PATIENCE_S)
            return list(self.events)

    def stop(self) -> None:
        if self._conn is not None and self._conn.sock is not None:
            with contextlib.suppress(OSError):  # already closed
                self._conn.sock.shutdown(socket.SHUT_RDWR)
