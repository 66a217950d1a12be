"""``python -m contextfold``: the same as the ``contextfold`` command."""

from __future__ import annotations

from contextfold.cli import main

raise SystemExit(main())
