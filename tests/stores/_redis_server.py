"""A real redis-server on 127.0.0.1 for the Redis store tests: a free port, a tmp dir, awaited without sleeping."""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path

import pytest
import redis

# redis-server prints a banner of a few dozen lines before "Ready to accept connections"; more means it is stuck.
_MAX_STARTUP_LINES = 500
# PING attempts after the ready line; each blocks on the socket (no sleeping), the first succeeds in practice.
_MAX_PING_ATTEMPTS = 20
_READY = "Ready to accept connections"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """redis-server with no persistence, started on a free loopback port, stopped by :meth:`stop`."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(directory), "--loglevel", "notice"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.proc.stdout is not None
        self._drainer = None
        seen: list[str] = []
        for _ in range(_MAX_STARTUP_LINES):
            line = self.proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if _READY in line:
                break
        if not any(_READY in line for line in seen):
            self.stop()
            pytest.fail(f"redis-server did not start: {''.join(seen)[-2000:]}")
        # Keep draining its log so that a full pipe never blocks the server.
        self._drainer: threading.Thread | None = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        self.client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)
        for attempt in range(_MAX_PING_ATTEMPTS):
            try:
                if self.client.ping():
                    break
            except redis.ConnectionError:
                if attempt == _MAX_PING_ATTEMPTS - 1:
                    self.stop()
                    raise

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self._drainer is not None:
            self._drainer.join()  # it ends at EOF, which the kill just caused
        if self.proc.stdout is not None:
            self.proc.stdout.close()
