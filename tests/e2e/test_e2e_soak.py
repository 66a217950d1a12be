"""A short soak (bench/soak.py has the 1,000-session one): random output sizes and faults, nothing lost or invalid."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "soak.py"
SESSIONS = 20
TURNS = 25


def load_soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("contextfold_soak", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_short_soak_completes_every_session_with_nothing_lost_or_invalid() -> None:
    soak = load_soak()
    outcomes = [soak.run_session(seed, turns=TURNS) for seed in range(SESSIONS)]
    report = soak.summarize(outcomes)
    assert report["errors"] == []
    assert report["completed"] == SESSIONS
    assert report["invalid_requests"] == 0
    assert report["messages_lost"] == 0
    assert report["compactions_without_growth"] == 0
    # The faults were really there: every kind happened at least once in these seeds.
    assert report["kills_resumed"] >= 1
    faults = report["faults_injected"]
    assert faults["summarizer"] >= 1 and faults["store"] >= 1 and faults["overflow"] >= 1
    assert report["compactions_per_session_max"] >= 1
