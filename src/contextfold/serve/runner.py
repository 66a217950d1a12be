"""Running the proxy: in the foreground under uvicorn (the CLI), or on a thread of its own (tests, benches)."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config import ServeConfig

if TYPE_CHECKING:
    from .ops import LineWriter

__all__ = ["ProxyServer", "configure_logging", "run"]

# The thread writing the log lines configure_logging set up (stopped when it is called again).
_writer: LineWriter | None = None
# How long start() waits for the server to say it is listening before giving up.
_START_TIMEOUT_S = 30.0


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as exc:
        from ..errors import MissingExtra

        raise MissingExtra("contextfold serve", "serve", module="uvicorn") from exc
    return uvicorn


def configure_logging(level: str = "info", redactor: Any = None) -> Callable[[], None]:
    """JSON lines on stderr for ``contextfold.serve`` (secrets redacted); uvicorn's own lines at warning.

    ``redactor``: what redacts the lines (the built-in patterns when None; ``ServeConfig.redactor()`` adds the
    operator's). Lines are formatted, redacted and written by a thread of their own (:class:`~.ops.LineQueue`): the
    event loop only queues them. Returns what stops that thread once the lines queued are written.
    """
    from ..redact import Redactor
    from .ops import JsonFormatter, LineQueue, LineWriter

    global _writer
    if _writer is not None:
        _writer.stop()
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(JsonFormatter(redactor if redactor is not None else Redactor()))
    handler = LineQueue()
    writer = LineWriter(handler, stream)
    writer.start()
    _writer = writer
    logger = logging.getLogger("contextfold.serve")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
    # uvicorn.error passes its records up to uvicorn: one handler, on the parent, writes each line once.
    uvicorn_root, uvicorn_error = logging.getLogger("uvicorn"), logging.getLogger("uvicorn.error")
    uvicorn_root.handlers[:], uvicorn_root.propagate = [handler], False
    uvicorn_error.handlers[:], uvicorn_error.propagate = [], True
    for uvicorn_logger in (uvicorn_root, uvicorn_error):
        uvicorn_logger.setLevel(logging.WARNING)

    def stop() -> None:
        global _writer
        if _writer is writer:
            _writer = None
            writer.stop()

    return stop


def _server(config: ServeConfig, app: Any) -> Any:
    uvicorn = _uvicorn()
    settings = uvicorn.Config(app, host=config.host, port=config.port, log_config=None, access_log=False,
                              timeout_graceful_shutdown=int(config.shutdown_grace_s), lifespan="on",
                              server_header=False, log_level=config.log_level)
    return uvicorn.Server(settings)


def run(config: ServeConfig) -> None:
    """Serve in the foreground until SIGINT/SIGTERM; in-flight requests get ``shutdown_grace_s`` to finish."""
    from .app import ServeApp

    stop_writing = configure_logging(config.log_level, config.redactor(log_lines=True))
    try:
        _server(config, ServeApp(config).app).run()
    finally:
        stop_writing()  # (the lines still queued are written)


class ProxyServer:
    """The proxy on a free port of 127.0.0.1, on a thread of its own (``with ProxyServer(config) as proxy:``).

    Args:
        config: Its settings (``host`` and ``port`` are taken from the socket it binds).
        **app_options: Passed to :class:`~contextfold.serve.app.ServeApp` (``backend=`` to share stores).
    """

    def __init__(self, config: ServeConfig, **app_options: Any) -> None:
        from .app import ServeApp

        self.config = config
        self.serve_app = ServeApp(config, **app_options)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((config.host, config.port))
        self._server = _server(config, self.serve_app.app)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the Anthropic SDK's base URL (OpenAI's is ``url + "/v1"``)."""
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> ProxyServer:
        """Serve on a daemon thread; returns once it accepts connections."""
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=[self._socket])),
                                        name="contextfold-serve", daemon=True)
        self._thread.start()
        deadline = threading.Event()
        for _ in range(int(_START_TIMEOUT_S / 0.01)):
            if self._server.started or not self._thread.is_alive():
                break
            deadline.wait(0.01)
        if not self._server.started:
            raise RuntimeError("the proxy did not start")
        return self

    def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (up to the grace period), close the stores."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._socket.close()

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
