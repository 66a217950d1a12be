"""``contextfold gc`` refuses a limit that is not a finite number, naming the option (red team, session 11).

``--max-mb inf`` and ``--archive-max-mb 1e400`` ended in "internal error: OverflowError: cannot convert float infinity
to integer (this is a bug in contextfold …)", exit 70, after the tool outputs had been cleaned; ``--max-age-days nan``
ran and deleted nothing, silently (every comparison with NaN is false).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.cli import main

NONCE = "rt11-gc-9b2d"


@pytest.mark.parametrize(("option", "value"), [
    ("--max-mb", "inf"), ("--archive-max-mb", "1e400"), ("--max-age-days", "nan"), ("--live-hours", "-inf"),
    ("--archive-max-age-days", "NaN"),
])
def test_a_limit_that_is_no_finite_number_is_a_usage_error_naming_the_option(
        option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "archive" / NONCE).mkdir(parents=True)
    code = main(["gc", "--store", f"local://{tmp_path / 'store'}", "--archive", str(tmp_path / "archive"),
                 option, value])
    err = capsys.readouterr().err
    assert code == 2
    assert option in err and "internal error" not in err
