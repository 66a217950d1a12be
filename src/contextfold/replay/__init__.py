"""Replay recorded agent sessions through contextfold and measure what the model would have seen.

>>> from contextfold.importers import load_sessions
>>> from contextfold.replay import ReplayOptions, run_replay
>>> result = run_replay(load_sessions("trajectories/sweagent-lm32b"), ReplayOptions(window=16_000))  # doctest: +SKIP
>>> result["valid_rate"], result["needed_fact_recall"], result["tokens_sent"]  # doctest: +SKIP
(1.0, 0.93, 1234567)

:mod:`.harness` replays one session, :mod:`.metrics` defines the figures, :mod:`.runner` spreads sessions over
worker processes. The result is the JSON that ``contextfold replay --json`` prints and the HTML report reads.
"""

from __future__ import annotations

from .harness import DEFAULT_MODEL, ReplayOptions, SessionReplayer, dump_path, manager_session_id, replay_session
from .metrics import JSON_VERSION, TurnMetrics, aggregate, percentile
from .runner import Progress, default_jobs, run_replay, summary_table

__all__ = [
    "DEFAULT_MODEL",
    "JSON_VERSION",
    "Progress",
    "ReplayOptions",
    "SessionReplayer",
    "TurnMetrics",
    "aggregate",
    "default_jobs",
    "demo_session_path",
    "dump_path",
    "manager_session_id",
    "percentile",
    "replay_session",
    "run_replay",
    "summary_table",
]


def demo_session_path() -> str:
    """The path of the recorded session shipped with the package for ``contextfold replay --demo``."""
    from importlib.resources import files

    folder = files("contextfold") / "data" / "demo"
    found = sorted(str(p) for p in folder.iterdir() if p.name.endswith((".traj", ".json", ".jsonl")))
    if not found:
        raise FileNotFoundError(f"no demo session in {folder}")
    return found[0]
