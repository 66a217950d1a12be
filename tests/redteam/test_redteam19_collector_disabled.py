"""A pause of the cyclic collector leaves ``gc.isenabled()`` to the application.

Found by the fifteenth session's red team (lane E), confirmed by the nineteenth (and listed as a known limitation in
DESIGN since the ninth session): ``manager/_collector`` paused collection with ``gc.disable()`` and ended the last
pause with ``gc.enable()`` whenever the collector had been on at the first one, so an application's ``gc.disable()``
made during a compaction of a long view was undone when it ended. A pause now sets the first threshold to 0 (which
stops automatic collection) and puts back the thresholds it found, unless the application set its own meanwhile.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from contextfold.manager._collector import collector_paused


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    if was:
        gc.enable()


def test_a_collector_the_application_turns_off_during_a_pause_stays_off() -> None:
    # Fails on f63f2d6 (red team 19): the pause's end turned the collector on again, the application's
    # gc.disable() made meanwhile notwithstanding.
    with collector_paused(10**6):
        gc.disable()
    assert not gc.isenabled()
    gc.enable()
    with collector_paused(10**6), collector_paused(10**6):  # (two pauses sharing one: the last one's end)
        gc.disable()
    assert not gc.isenabled()


def test_thresholds_the_application_sets_during_a_pause_are_kept_and_its_own_are_put_back() -> None:
    before = gc.get_threshold()
    with collector_paused(10**6):
        assert gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before
    with collector_paused(10**6):
        gc.set_threshold(1234, *before[1:])
    assert gc.get_threshold()[0] == 1234
