"""Real servers on loopback for tests and benchmarks of the shared stores: ``redis-server`` and ``moto_server`` (S3).

Each is started on a free 127.0.0.1 port, awaited by reading its own "ready" line (no sleeping), and stopped by
``stop()`` or the ``with`` block. :meth:`RedisServer.restart` stops the server and starts it again on the same port
and data directory (with the append-only file on, the data survives), for tests of a restart mid-run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any

__all__ = ["MotoServer", "RedisServer", "ServiceError", "free_port", "s3_environment"]

# Servers print a banner of a few dozen lines before they say they are ready; more means they are stuck.
_MAX_STARTUP_LINES = 500
# Connection attempts after the ready line; each blocks on the socket, the first succeeds in practice.
_MAX_CONNECT_ATTEMPTS = 50


class ServiceError(RuntimeError):
    """A server could not be started (not installed, or it did not say it was ready)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def s3_environment() -> dict[str, str]:
    """Environment for boto3 against moto: fake credentials, no lookups beyond loopback."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def _await_line(stream: IO[str], marker: str, what: str) -> None:
    seen: list[str] = []
    for _ in range(_MAX_STARTUP_LINES):
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return
    raise ServiceError(f"{what} did not start: {''.join(seen)[-2000:]}")


def _await_port(port: int, what: str) -> None:
    for attempt in range(_MAX_CONNECT_ATTEMPTS):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if attempt == _MAX_CONNECT_ATTEMPTS - 1:
                raise ServiceError(f"{what} does not accept connections on port {port}") from None


def _drain(stream: IO[str]) -> None:
    for _ in stream:  # keep reading so that a full pipe never blocks the server
        pass


class RedisServer:
    """``redis-server`` on 127.0.0.1.

    Args:
        directory: Its working directory (the append-only file goes there).
        appendonly: Persist every write (``appendfsync always``), so that a :meth:`restart` keeps the data.
        binary: The server binary (found on PATH by default).
    """

    def __init__(self, directory: str | Path, *, appendonly: bool = False, binary: str | None = None) -> None:
        found = binary or shutil.which("redis-server")
        if found is None:
            raise ServiceError("redis-server is not installed (apt-get install redis-server)")
        self.binary = found
        self.directory = Path(directory)
        self.appendonly = appendonly
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[str] | None = None
        self.start()

    def start(self) -> None:
        """Start the server (again) on its port and directory."""
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly else ["--appendonly", "no"]
        proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence,
             "--dir", str(self.directory), "--loglevel", "notice"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert proc.stdout is not None
        self._proc = proc
        try:
            _await_line(proc.stdout, "Ready to accept connections", "redis-server")
        except ServiceError:
            self.stop()
            raise
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        _await_port(self.port, "redis-server")

    def stop(self) -> None:
        """Kill the server (as a crash would) and wait for it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def restart(self) -> None:
        """Kill the server and start it again on the same port and directory."""
        self.stop()
        self.start()

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class MotoServer:
    """``moto_server`` (an S3-compatible server) on 127.0.0.1, with the given buckets created."""

    def __init__(self, *buckets: str, binary: str | None = None) -> None:
        found = binary or shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
        if not Path(found).exists():
            raise ServiceError("moto_server is not installed (pip install 'moto[server]')")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, **s3_environment()}
        self._proc: subprocess.Popen[str] | None = subprocess.Popen(
            [found, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )
        assert self._proc.stderr is not None
        try:
            _await_line(self._proc.stderr, "Running on", "moto_server")
        except ServiceError:
            self.stop()
            raise
        threading.Thread(target=_drain, args=(self._proc.stderr,), daemon=True).start()
        _await_port(self.port, "moto_server")
        if buckets:
            client = self.client()
            for bucket in buckets:
                client.create_bucket(Bucket=bucket)

    def client(self) -> Any:
        """A boto3 S3 client for this server (path-style addressing, fake credentials)."""
        import boto3
        from botocore.config import Config

        env = s3_environment()
        return boto3.client("s3", endpoint_url=self.url, region_name=env["AWS_DEFAULT_REGION"],
                            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                            config=Config(s3={"addressing_style": "path"}))

    def stop(self) -> None:
        """Stop the server and wait for it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
