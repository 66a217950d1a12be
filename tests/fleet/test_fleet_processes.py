"""A small fleet for real: worker processes, a real redis-server and moto_server, recorded turns, SIGKILLs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contextfold.testing.fleet import FleetConfig, recorded_turns, run_fleet

TAU = Path(__file__).resolve().parents[3] / "shared" / "data" / "trajectories" / "taubench-airline"


def test_a_fleet_with_killed_workers_loses_nothing_and_sends_only_valid_views() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    if not TAU.exists():
        pytest.skip(f"shared data not found at {TAU}")
    config = FleetConfig(workers=3, sessions=6, data=str(TAU), window=6_000, kill_every=7, max_turns=9, seed=3)
    report = run_fleet(config)
    assert report.errors == []
    assert report.turns == sum(len(turns) for turns in recorded_turns(config).values())
    assert report.kills >= 3  # 40+ turns, a kill every 7
    assert report.views > 0 and report.invalid_views == 0
    assert (report.lost, report.duplicated, report.out_of_order, report.mismatched) == (0, 0, 0, 0)
    assert report.verified == config.sessions
    assert report.compactions_applied > 0
