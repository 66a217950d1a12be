"""The proxy's settings: where it listens, where it forwards, where sessions live, and its limits."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..redact import Redactor

__all__ = ["DEFAULT_ANTHROPIC_BASE_URL", "DEFAULT_OPENAI_BASE_URL", "ServeConfig", "is_loopback"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_PORT = 8787
# A request body larger than this is refused with 413 before it is parsed. It must be well over the providers' own
# limits (Anthropic's 32 MB): an agent's screenshot history past the provider's limit is what the proxy brings back
# under it (the oldest images go), and at 32 MiB the proxy refused it itself first. 128 MiB still keeps one request
# from filling the proxy's memory.
DEFAULT_MAX_BODY_BYTES = 128 * 1024 * 1024
# Reasoning models can think for minutes before the first byte; the providers' own SDKs wait 10 minutes.
DEFAULT_UPSTREAM_TIMEOUT_S = 600.0
# Connecting to the upstream should take well under a second; a minute means it is not there.
DEFAULT_CONNECT_TIMEOUT_S = 30.0
# In-flight requests get this long to finish when the proxy is told to stop (SIGTERM), then they are cut.
DEFAULT_SHUTDOWN_GRACE_S = 30.0
# A session not continued for this long is deleted (its stored view holds the conversation as the model saw it,
# secrets in clear): as long as the archive keeps a session's transcripts (stores.archive_fs.ARCHIVE_MAX_AGE_S).
DEFAULT_SESSION_MAX_AGE_S = 30 * 24 * 3600.0


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``: addresses no other machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything ``contextfold serve`` is told.

    Attributes:
        host: Address to bind; loopback unless told otherwise.
        port: TCP port.
        token: Callers must send it in the ``x-contextfold-token`` header (Prometheus may send it to ``/metrics``
            as ``Authorization: Bearer``); required when ``host`` is not loopback.
        openai_base_url: Upstream of Chat Completions and Responses (``…/v1``).
        anthropic_base_url: Upstream of Anthropic Messages (without ``/v1``, as the Anthropic SDK takes it).
        sessions: Session store: ``"local"`` (SQLite under ``state_dir``), ``"memory"``, or ``"redis://…"``.
        store: Tool output store: ``"local"``, ``"memory"`` or ``"redis://…"``.
        archive: Archive: a directory, ``"memory"``, ``"s3://bucket/prefix"``; None for ``<state_dir>/archive``.
        state_dir: Where the local stores live (``.contextfold`` by default).
        windows: Context window per model name, for models the registry does not know or to work in a smaller one.
        default_window: Window of a model neither the registry nor ``windows`` knows; None refuses such models.
        policy: Policy fields (``trigger_pct``, …) for every session.
        retrieval_tools: Give the model ``tool_output_cache``, ``tool_output_cache_grep`` and ``history_search``
            and answer its calls to them inside the proxy.
        max_body_bytes: Larger request bodies get 413.
        upstream_timeout_s: Read timeout of an upstream call (per chunk when streaming).
        connect_timeout_s: Connect timeout of an upstream call.
        recovery_retries: Overflow retries per request.
        key_salt: Mixed into the hash of callers' API keys; instances serving the same sessions share it.
        redact: Redact secrets from the archive and events.
        redact_patterns: The operator's own secret patterns (name -> regular expression), redacted beside the
            built-in ones wherever the proxy redacts: sessions' archives and events, and its log lines (a refusal
            before its session is found included).
        shutdown_grace_s: How long in-flight requests may finish after a stop signal.
        session_max_age_s: Sessions not continued for this long are deleted (a Redis session expires); None keeps
            them until deleted.
        log_level: Logging level of the proxy's JSON log lines.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    openai_base_url: str = DEFAULT_OPENAI_BASE_URL
    anthropic_base_url: str = DEFAULT_ANTHROPIC_BASE_URL
    sessions: str = "local"
    store: str = "local"
    archive: str | None = None
    state_dir: str | None = None
    windows: Mapping[str, int] = field(default_factory=dict)
    default_window: int | None = None
    policy: Mapping[str, Any] | None = None
    retrieval_tools: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    upstream_timeout_s: float = DEFAULT_UPSTREAM_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    recovery_retries: int = 3
    key_salt: str = ""
    redact: bool = True
    redact_patterns: Mapping[str, str] = field(default_factory=dict)
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S
    log_level: str = "info"
    session_max_age_s: float | None = DEFAULT_SESSION_MAX_AGE_S

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.token:
            raise ConfigError(f"binding to {self.host} lets other machines reach the proxy: give a token "
                              "(--token or CONTEXTFOLD_SERVE_TOKEN) that callers must send", field="token")
        if self.token is not None and len(self.token) < 16:
            raise ConfigError("must be at least 16 characters (it is all that guards the proxy)", field="token")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65_535:
            raise ConfigError(f"must be an integer from 0 to 65535, got {self.port!r}", field="port")
        for name in ("openai_base_url", "anthropic_base_url"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.startswith(("http://", "https://")):
                raise ConfigError(f"must be an http:// or https:// URL, got {value!r}", field=name)
        for model, window in self.windows.items():
            if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
                raise ConfigError(f"must be a positive integer, got {window!r}", field=f"windows.{model}")
        for name in ("max_body_bytes", "recovery_retries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"must be a non-negative integer, got {value!r}", field=name)
        if self.default_window is not None and (not isinstance(self.default_window, int) or self.default_window <= 0):
            raise ConfigError(f"must be a positive integer, got {self.default_window!r}", field="default_window")
        for name, source in self.redact_patterns.items():
            problem = _pattern_problem(name, source)
            if problem is not None:
                raise ConfigError(problem, field=f"redact_patterns.{name}")
        for name in ("upstream_timeout_s", "connect_timeout_s", "shutdown_grace_s", "session_max_age_s"):
            value = getattr(self, name)
            if value is None and name == "session_max_age_s":
                continue
            # (finite: inf gave a lease a Redis key could not live for, math.ceil(inf), and uvicorn a grace int(inf))
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ConfigError(f"must be a positive, finite number of seconds, got {value!r}", field=name)

    def redactor(self, *, enabled: bool = True, log_lines: bool = False) -> Redactor:
        """A redactor of the built-in patterns and ``redact_patterns`` (``enabled``: False for one that does not).

        ``log_lines``: it redacts the proxy's log lines, where an operator's pattern scans within a budget growing
        with the line (a backtracking one would hold the instance a second a line); elsewhere each scan has the whole
        second (past it the whole text is redacted).
        """
        from ..redact import Redactor, SecretPattern

        if not log_lines:
            return Redactor(enabled=enabled, patterns=self.redact_patterns)
        patterns = [SecretPattern.untrusted(name, source, log_lines=True)
                    for name, source in self.redact_patterns.items()]
        return Redactor(enabled=enabled, patterns=patterns)

    def window_for(self, model: str) -> int | None:
        """The window configured for ``model`` (exact name first), or None to use the registry's."""
        return self.windows.get(model)


# Ordinary text with no secret in it (prose, a path, code, a log line): an operator's pattern that redacts most of it
# is a catch-all (".", ".+", "\\S+", "\\w+"), refused at start: every log line and message would be redacted.
_PLAIN_PROBE = ("The build passed in 12 s; see the log at /tmp/run-7.txt for details.\n"
                "def total(items): return sum(item.price for item in items)\n"
                "2026-11-27 18:40:02 INFO worker 3 finished the nightly report, 42 rows written.")
# The share of the probe's characters an operator's pattern may redact: a secret's shape leaves most of it; and of
# any one of its lines (a word pattern such as "[A-Za-z]{4,}" takes 60% of the code line; an anchored catch-all, all).
_MAX_PROBE_REDACTED_SHARE = 0.5
_MAX_LINE_REDACTED_SHARE = 0.75


def _pattern_problem(name: str, source: object) -> str | None:
    """Why ``source`` is no secret pattern the redactor takes (compiled as it compiles them), or None."""
    if not isinstance(source, str):
        return f"must be a regular expression, got {type(source).__name__}"
    from ..redact import Redactor

    try:
        Redactor(patterns={name: source})
    except ValueError as exc:  # (the untrusted-pattern compiler's InvalidPattern)
        return str(exc)
    probe = Redactor(builtin=False, remember=False, patterns={name: source})
    placeholder = f"[REDACTED:{name}]"
    # Each line as well as the whole: an anchored catch-all ("^.+", ".+$", "\\A.*\\Z") takes one line of the three,
    # yet every log line and almost every message is one line, redacted whole.
    samples = [(_PLAIN_PROBE, _MAX_PROBE_REDACTED_SHARE)]
    samples += [(line, _MAX_LINE_REDACTED_SHARE) for line in _PLAIN_PROBE.splitlines()]
    for sample, share in samples:
        probed = probe.redact_text(sample)
        redacted = len(sample) - len(probed.replace(placeholder, ""))
        if redacted > len(sample) * share:
            # (a catch-all such as "." or "\\S+", or one that backtracks on plain text: redaction fails closed)
            return (f"the pattern {source!r} redacts {redacted} of the {len(sample)} characters of plain text with "
                    f"no secret in it ({sample[:60]!r} became {probed[:60]!r}{'...' if len(probed) > 60 else ''}): "
                    "every log line and message would be mostly redacted; match the secret's own shape (a prefix, "
                    "a length)")
    return None
