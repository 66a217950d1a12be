"""A process SIGKILLed in the middle of a write leaves the local store readable, with every completed entry intact.

The child writes entries through a real ``ToolOutputCache`` over a ``LocalBlobStore`` and reports each completed
ref on a pipe. During the last, large write it reports "mid-write" from inside the SQLite transaction (a trace
callback fires on each chunk insert) and then blocks; the parent kills it at that moment. No sleeps: the parent
waits on the pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contextfold.cache import ToolOutputCache, ref_id_for
from contextfold.stores.local import LocalBlobStore

CHILD = textwrap.dedent(
    """
    import os, sys
    from contextfold.cache import ToolOutputCache
    from contextfold.stores.local import LocalBlobStore

    directory, report_fd, completed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    report = os.fdopen(report_fd, "w", buffering=1)
    store = LocalBlobStore(directory)
    # A tiny page cache makes SQLite spill the uncommitted chunks into the WAL file before the kill, so the
    # test covers a half-written transaction on disk, not only one held in memory.
    store._conn.execute("PRAGMA cache_size=8")
    cache = ToolOutputCache(store)
    for i in range(completed):
        text = "".join(f"entry {i} line {n}\\n" for n in range(200 + i * 37))
        ref = cache.put(text)
        report.write(f"done {ref.id}\\n")

    inserts = 0

    def on_statement(sql):
        global inserts
        if sql.startswith("INSERT INTO chunks"):
            inserts += 1
            if inserts == 40:
                report.write("mid-write\\n")
                os.read(0, 1)  # block until killed: the parent never writes to our stdin

    store._conn.set_trace_callback(on_statement)
    cache.put("".join(f"the write that never completes {n}\\n" for n in range(200_000)))
    report.write("finished\\n")  # never reached
    """
)


@pytest.mark.parametrize("completed", [0, 1, 25])
def test_sigkill_mid_write_keeps_every_completed_entry(tmp_path: Path, completed: int) -> None:
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), str(write_fd), str(completed)],
        pass_fds=(write_fd,),
        stdin=subprocess.PIPE,
    )
    os.close(write_fd)
    done: list[str] = []
    try:
        with os.fdopen(read_fd) as report:
            for line in report:
                if line.startswith("done "):
                    done.append(line.split()[1])
                elif line.strip() == "mid-write":
                    child.send_signal(signal.SIGKILL)
                    break
                else:
                    pytest.fail(f"unexpected report from the child: {line!r}")
            else:
                pytest.fail("the child exited before reaching the middle of its write")
    finally:
        child.wait()
        assert child.stdin is not None
        child.stdin.close()
    assert child.returncode == -signal.SIGKILL
    assert len(done) == completed

    wal = tmp_path / "tool_outputs.sqlite3-wal"
    assert wal.exists() and wal.stat().st_size > 0, "the kill should leave a WAL with uncommitted frames"

    with LocalBlobStore(tmp_path) as store:
        cache = ToolOutputCache(store)
        for i, ref_id in enumerate(done):
            expected = "".join(f"entry {i} line {n}\n" for n in range(200 + i * 37))
            assert cache.get(ref_id) == expected
            assert ref_id == ref_id_for(expected.encode())
            assert cache.read(ref_id, 100, 2).lines == (f"entry {i} line 99", f"entry {i} line 100")
        partial = ref_id_for("".join(f"the write that never completes {n}\n" for n in range(200_000)).encode())
        assert not store.exists(partial)
        assert sorted(cache.ref_ids()) == sorted(done)
        # The store still takes writes, and a collection removes the orphaned line index of the killed write.
        again = cache.put("after the crash\n")
        assert cache.get(again.id) == "after the crash\n"
        cache.gc(set(done) | {again.id})
        assert sorted(e.key for e in store.entries()) == sorted([*done, again.id])
