"""``contextfold serve``: the context-managing proxy for agents in any language (``pip install 'contextfold[serve]'``).

Point any OpenAI or Anthropic client at it (``OPENAI_BASE_URL=http://127.0.0.1:8787/v1``,
``ANTHROPIC_BASE_URL=http://127.0.0.1:8787``); it forwards to the providers with the client's own key.
"""

from __future__ import annotations

import argparse
import os

from ..errors import ConfigError
from ._common import EXIT_OK, Subparsers

__all__ = ["config_from_args", "register", "run"]

# Settings that may come from the environment (secrets should not sit in a process list): option -> variable.
_ENVIRONMENT = {
    "token": "CONTEXTFOLD_SERVE_TOKEN",
    "key_salt": "CONTEXTFOLD_SERVE_KEY_SALT",
    "openai_base_url": "CONTEXTFOLD_SERVE_OPENAI_BASE_URL",
    "anthropic_base_url": "CONTEXTFOLD_SERVE_ANTHROPIC_BASE_URL",
    "sessions": "CONTEXTFOLD_SERVE_SESSIONS",
    "store": "CONTEXTFOLD_SERVE_STORE",
    "archive": "CONTEXTFOLD_SERVE_ARCHIVE",
}


def register(subparsers: Subparsers) -> None:
    """Add the ``serve`` command."""
    from ..serve.config import DEFAULT_ANTHROPIC_BASE_URL, DEFAULT_OPENAI_BASE_URL, DEFAULT_PORT

    parser = subparsers.add_parser(
        "serve",
        help="run the context-managing proxy (OpenAI Chat/Responses, Anthropic Messages)",
        description="An HTTP proxy that keeps any agent's conversation inside its model's window: point an OpenAI "
        "or Anthropic client at it. Settings marked (env) can come from the environment variable named.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other "
                        "address requires --token)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--token", help="callers must send it in the x-contextfold-token header "
                        f"(env {_ENVIRONMENT['token']})")
    parser.add_argument("--openai-base-url", help=f"upstream of Chat Completions and Responses (default "
                        f"{DEFAULT_OPENAI_BASE_URL}; env {_ENVIRONMENT['openai_base_url']})")
    parser.add_argument("--anthropic-base-url", help=f"upstream of Anthropic Messages (default "
                        f"{DEFAULT_ANTHROPIC_BASE_URL}; env {_ENVIRONMENT['anthropic_base_url']})")
    parser.add_argument("--sessions", help="session store: local (default), memory, redis://host:port/db (env "
                        f"{_ENVIRONMENT['sessions']})")
    parser.add_argument("--store", help="tool output store: local (default), memory, redis://… (env "
                        f"{_ENVIRONMENT['store']})")
    parser.add_argument("--archive", help="archive: a directory (default <state-dir>/archive), s3://bucket/prefix "
                        f"(env {_ENVIRONMENT['archive']})")
    parser.add_argument("--state-dir", help="where the local stores live (default .contextfold)")
    parser.add_argument("--session-max-age-days", type=float, metavar="DAYS",
                        help="delete a session not continued for this long (default 30, as the archive; 0 keeps "
                        "sessions until deleted)")
    parser.add_argument("--window", action="append", default=[], metavar="MODEL=TOKENS",
                        help="context window of a model (repeatable): for models the registry does not know, or to "
                        "work in a smaller window")
    parser.add_argument("--default-window", type=int, help="window of models neither the registry nor --window knows")
    parser.add_argument("--retrieval-tools", action="store_true", help="give the model tool_output_cache, "
                        "tool_output_cache_grep and history_search and answer its calls in the proxy")
    parser.add_argument("--max-body-bytes", type=int, help="larger request bodies get 413 (default 128 MiB)")
    parser.add_argument("--upstream-timeout", type=float, help="seconds to wait for the upstream (default 600)")
    parser.add_argument("--key-salt", help="mixed into the hash of callers' keys; instances serving the same "
                        f"sessions share it (env {_ENVIRONMENT['key_salt']})")
    parser.add_argument("--no-redact", action="store_true", help="do not redact secrets from the archive")
    parser.add_argument("--redact-pattern", action="append", default=[], metavar="NAME=REGEX",
                        help="a secret pattern of yours, redacted beside the built-in ones in archives, events and "
                        "log lines (repeatable)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.set_defaults(handler=run)


def _windows(values: list[str]) -> dict[str, int]:
    windows: dict[str, int] = {}
    for value in values:
        model, sep, tokens = value.rpartition("=")
        if not sep or not model or not tokens.strip().isdigit() or int(tokens) <= 0:
            raise ConfigError(f"expected MODEL=TOKENS with a positive number of tokens, got {value!r}",
                              field="--window")
        windows[model] = int(tokens)
    return windows


def _patterns(values: list[str]) -> dict[str, str]:
    patterns: dict[str, str] = {}
    for value in values:
        name, sep, source = value.partition("=")
        if not sep or not name or not source:
            raise ConfigError(f"expected NAME=REGEX, got {value!r}", field="--redact-pattern")
        patterns[name] = source
    return patterns


def config_from_args(args: argparse.Namespace, environ: dict[str, str] | None = None) -> object:
    """The ServeConfig the command line and the environment describe (the command line wins)."""
    from ..serve.config import ServeConfig

    env = os.environ if environ is None else environ
    options: dict[str, object] = {"host": args.host, "port": args.port, "windows": _windows(args.window),
                                  "retrieval_tools": args.retrieval_tools, "redact": not args.no_redact,
                                  "redact_patterns": _patterns(getattr(args, "redact_pattern", None) or []),
                                  "log_level": args.log_level}
    for name, variable in _ENVIRONMENT.items():
        value = getattr(args, name, None) or env.get(variable)
        if value:
            options[name] = value
    days = getattr(args, "session_max_age_days", None)
    if days is not None:
        options["session_max_age_s"] = days * 24 * 3600 if days > 0 else None
    for name, option in (("state_dir", "state_dir"), ("default_window", "default_window"),
                         ("max_body_bytes", "max_body_bytes"), ("upstream_timeout_s", "upstream_timeout")):
        value = getattr(args, option)
        if value is not None:
            options[name] = value
    return ServeConfig(**options)  # type: ignore[arg-type]


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    from ..serve.config import ServeConfig
    from ..serve.runner import run as serve

    config = config_from_args(args)
    assert isinstance(config, ServeConfig)
    serve(config)
    return EXIT_OK
