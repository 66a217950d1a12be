"""Workers sharing one session's secret memory, interleaved one store operation at a time: nothing saved is lost.

Each worker runs in a thread of its own over the shared store through a gate that lets one store operation through
each time the test says so; the test (hypothesis) picks which worker's next operation runs, so every interleaving is
reproducible. Between any two operations, with every worker stopped, a fresh load must hold every value a worker's
save said it stored (the invariant the sixteenth session's review found broken: a worker's merge over a base another
worker had replaced made saved values unreadable). A worker may also start again (a new SecretMemory: a load).
"""

from __future__ import annotations

import threading
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secret_memory_workers import Secrets

from contextfold.redact import SecretMemory
from contextfold.redact import _memory_records as records_module
from contextfold.redact import memory as memory_module
from contextfold.stores.memory import MemoryBlobStore

NONCE = "rtilv5k"
SECRETS = Secrets(NONCE)
_SESSION = f"{NONCE}-session"
_RESTART = -1  # (a job: the worker starts again with a new SecretMemory, loading the store)
# Records merged into a run here: merges and their alignments to a base every few saves (8 needs long examples).
_TEST_FAN_IN = 2


class _Gated(MemoryBlobStore):
    """The shared store as one worker sees it: each operation waits until the test lets it through."""

    def __init__(self, inner: MemoryBlobStore) -> None:
        super().__init__()
        self.inner = inner
        self.go = threading.Semaphore(0)
        self.parked = threading.Semaphore(0)
        self.wrote = False  # (its last operation let through changed the store: the test loads it then)

    def _gate(self, writes: bool = True) -> None:
        self.parked.release()
        self.go.acquire()
        self.wrote = writes

    def put(self, key: str, data: bytes) -> None:
        self._gate()
        self.inner.put(key, data)

    def put_new(self, key: str, data: bytes) -> bool:
        self._gate()
        return self.inner.put_new(key, data)

    def put_if(self, key: str, data: bytes | None, expected: bytes | None) -> bool:
        self._gate()
        return self.inner.put_if(key, data, expected)

    def get(self, key: str) -> bytes:
        self._gate(writes=False)
        return self.inner.get(key)

    def exists(self, key: str) -> bool:
        self._gate(writes=False)
        return self.inner.exists(key)

    def delete(self, key: str) -> bool:
        self._gate()
        return self.inner.delete(key)


class _Worker:
    def __init__(self, name: str, shared: MemoryBlobStore, jobs: list[int], saved: set[str]) -> None:
        self.store = _Gated(shared)
        self.name, self.jobs, self.saved = name, jobs, saved
        self.done = False
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            memory = SecretMemory(self.store, _SESSION)
            mine: list[str] = []
            for i, job in enumerate(self.jobs):
                if job == _RESTART:
                    memory = SecretMemory(self.store, _SESSION)
                    memory.values()
                    continue
                mine.append(SECRETS.value(self.name, i) * job)
                memory.learn(mine[-1], "password")
                # (its own values only: one it read from another worker's record may still be that worker's to
                # write again, whose save has not returned)
                if memory.save() and not memory._unsaved:
                    self.saved.update(mine)
        except BaseException as error:  # (told to the test, which must not wait for this thread)
            self.error = error
        finally:
            self.done = True
            self.store.parked.release()

    def step(self) -> bool:
        """Let the worker's next store operation through; back when it waits for the next one (or is done).

        True when the operation changed the store.
        """
        self.store.go.release()
        self.store.parked.acquire()
        return self.store.wrote


_JOB = st.one_of(st.just(_RESTART), st.sampled_from([1, 1, 1, 2, 40]))  # (a value's repeats: 40 outweighs bases)


# (which worker, and how many of its store operations in a row: a worker stopped inside a fold while another saves
# many times is what loses values, and single steps drawn at random almost never make it)
_BURSTS = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 60)), min_size=5, max_size=40)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(st.lists(_JOB, min_size=6, max_size=20), min_size=2, max_size=3), schedule=_BURSTS,
       fold_min_bytes=st.sampled_from([0, 600, 2_000]))
def test_a_fresh_load_holds_every_value_saved_whatever_the_interleaving(
        jobs: list[list[int]], schedule: list[tuple[int, int]], fold_min_bytes: int) -> None:
    shared = MemoryBlobStore()
    saved: set[str] = set()
    with mock.patch.object(memory_module, "_FOLD_MIN_BYTES", fold_min_bytes), \
            mock.patch.object(memory_module, "FAN_IN", _TEST_FAN_IN), \
            mock.patch.object(records_module, "FAN_IN", _TEST_FAN_IN):
        workers = [_Worker(f"w{i}", shared, worker_jobs, saved) for i, worker_jobs in enumerate(jobs)]
        for worker in workers:
            worker.thread.start()
            worker.store.parked.acquire()  # (its first store operation, or done)
        bursts = iter(schedule)
        while alive := [worker for worker in workers if not worker.done]:
            which, length = next(bursts, (0, 10**6))  # (then the first one still running, to its end)
            worker = alive[which % len(alive)]
            for _ in range(length):
                if worker.done:
                    break
                wrote = worker.step()
                if worker.error is not None:
                    raise worker.error
                if wrote:  # (every worker stopped between two operations)
                    loaded = SecretMemory(shared, _SESSION).values()
                    assert sorted(saved - loaded.keys()) == []
        for worker in workers:
            worker.thread.join()
