"""Shared fixtures: paths to the recorded sessions and a switch that turns skips into failures in CI."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
TRAJECTORIES = SHARED_DATA / "trajectories"
REQUIRE_ALL = os.environ.get("CONTEXTFOLD_REQUIRE_ALL") == "1"

if TYPE_CHECKING:
    from contextfold.testing.services import MotoServer, RedisServer


def require(condition: bool, why: str) -> None:
    """Skip when ``condition`` is false, except in CI, where every service is installed and a skip is a bug."""
    if condition:
        return
    if REQUIRE_ALL:
        pytest.fail(f"required in CI: {why}")
    pytest.skip(why)


@contextmanager
def running_moto(bucket: str) -> Iterator[MotoServer]:
    """A moto_server on loopback holding ``bucket``, with the S3 tests' environment (fake credentials, no lookups)."""
    from contextfold.testing.services import MotoServer, s3_environment

    with pytest.MonkeyPatch.context() as env:
        for name, value in s3_environment().items():
            env.setenv(name, value)
        binary = Path(sys.executable).with_name("moto_server")
        require(binary.exists(), f"moto_server not found next to {binary.parent}")
        with MotoServer(bucket, binary=str(binary)) as server:
            yield server


def require_binary(name: str) -> str:
    path = shutil.which(name)
    require(path is not None, f"{name} is not installed")
    assert path is not None
    return path


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server on loopback for one module's tests (in CI, a missing binary fails instead of skipping)."""
    from contextfold.testing.services import RedisServer

    with RedisServer(tmp_path_factory.mktemp("redis"), binary=require_binary("redis-server")) as running:
        yield running


@pytest.fixture(scope="session")
def trajectories() -> Path:
    require(TRAJECTORIES.is_dir(), f"shared data not found at {TRAJECTORIES}")
    return TRAJECTORIES


def all_session_files() -> list[Path]:
    """Every recorded session file under ../shared/data/trajectories."""
    if not TRAJECTORIES.is_dir():
        return []
    return sorted(p for p in TRAJECTORIES.rglob("*") if p.is_file() and p.suffix in {".traj", ".json", ".jsonl"})
