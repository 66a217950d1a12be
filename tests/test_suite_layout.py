"""The suite's own layout: test modules import shared helpers with ``from conftest import ...``."""

from __future__ import annotations

from conftest import ROOT


def test_only_the_root_of_the_tests_has_a_conftest() -> None:
    # pytest imports every conftest.py as the module "conftest": a second one shadows the root one, and every test
    # module collected after it fails to import (it happened once, with 6 modules).
    tests = ROOT / "tests"
    nested = sorted(str(p.relative_to(ROOT)) for p in tests.rglob("conftest.py") if p.parent != tests)
    assert nested == []
