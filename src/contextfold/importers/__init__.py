"""Recorded agent sessions -> contextfold messages: SWE-agent ``.traj``, tau-bench results, JSONL of any wire format.

>>> from contextfold.importers import load_sessions
>>> sessions = load_sessions("trajectories/sweagent-lm32b")  # doctest: +SKIP
>>> sessions[0].id, sessions[0].source, len(sessions[0].messages)  # doctest: +SKIP
('astropy__astropy-12907', 'swe_agent', 70)

The parsers are pure functions over parsed JSON (usable on data from anywhere); only :func:`load_sessions`,
:func:`load_session` and :func:`detect_source` given a path read files.
"""

from __future__ import annotations

from ._files import SESSION_SUFFIXES, detect_source, load_session, load_sessions, session_files
from ._session import RecordedSession, SessionFileError, Source
from .jsonl import parse_messages
from .swe_agent import TextCall, parse_swe_agent, parse_text_call
from .tau_bench import parse_tau_bench, parse_tau_bench_entry

__all__ = [
    "SESSION_SUFFIXES",
    "RecordedSession",
    "SessionFileError",
    "Source",
    "TextCall",
    "detect_source",
    "load_session",
    "load_sessions",
    "parse_messages",
    "parse_swe_agent",
    "parse_tau_bench",
    "parse_tau_bench_entry",
    "parse_text_call",
    "session_files",
]
