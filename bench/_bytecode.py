"""Compile a source tree's bytecode before a benchmark's child process imports it, as ``pip install`` does.

Where ``PYTHONDONTWRITEBYTECODE`` is set (this project's work machines), each child compiled every module it imported,
and the modules contextfold imports lazily were compiled inside the timed calls: a cold ``compact()`` imports nine
(62-81 ms of CPU without bytecode, 33 with, of a ~420 ms call), the first masking turn of a run several. A user's
installed package has its bytecode; a benchmark of a source tree should too. Python reads existing bytecode whatever
that variable says, so compiling once before the runs is enough.
"""

from __future__ import annotations

import compileall


def compiled(src: str) -> str:
    """Write the bytecode of every module under ``src`` that has none or an outdated one; return ``src``."""
    compileall.compile_dir(src, quiet=1)
    return src
