"""``LazyModule``: a module imported when a name of it is first read, each name then a plain attribute."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextfold._lazy import LazyModule

SRC = Path(__file__).resolve().parents[1] / "src"


def test_a_name_is_read_from_the_module_once_and_then_kept() -> None:
    events = LazyModule("..telemetry.events", "contextfold.manager")
    from contextfold.telemetry import events as module

    assert "CacheMasked" not in vars(events)
    assert events.CacheMasked is module.CacheMasked
    assert vars(events)["CacheMasked"] is module.CacheMasked  # (kept: no __getattr__ on the next read)
    with pytest.raises(AttributeError):
        events.NoSuchName_lazy_6b1d


def test_nothing_is_imported_before_a_name_is_read() -> None:
    code = ("import sys\nfrom contextfold._lazy import LazyModule\n"
            "lazy = LazyModule('contextfold.summarize.entities')\n"
            "print('contextfold.summarize.entities' in sys.modules)\nlazy.extract_entities\n"
            "print('contextfold.summarize.entities' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
