"""Archive stores: one contract, checked on the filesystem store and on S3 (a real moto_server on loopback)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:  # tests/ is a package (tests/__init__.py) in the repository; plain `conftest` when it is not
    from tests.conftest import require
except ImportError:  # pragma: no cover
    from conftest import require  # type: ignore[no-redef]

from contextfold.archive import Archive, ArchiveStore, MemoryArchiveStore
from contextfold.errors import ConfigError
from contextfold.messages import Message, ToolCall
from contextfold.stores.archive_fs import FilesystemArchiveStore
from contextfold.stores.archive_open import open_archive_store

# How many stderr lines moto_server may print before it says it is listening; it prints about five.
_MAX_STARTUP_LINES = 200
# Connection attempts once it said so; the first one succeeds in practice.
_MAX_CONNECT_ATTEMPTS = 50
_BUCKET = "cf-archive"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    """moto_server on 127.0.0.1: started, awaited by reading its own "Running on" line, then stopped."""

    def __init__(self) -> None:
        binary = Path(sys.executable).with_name("moto_server")
        require(binary.exists(), f"moto_server not found next to {sys.executable}")
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        seen: list[str] = []
        for _ in range(_MAX_STARTUP_LINES):
            line = self.proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if "Running on" in line:
                break
        if "Running on" not in "".join(seen):
            self.stop()
            pytest.fail(f"moto_server did not start: {''.join(seen)[-2000:]}")
        # Keep draining its request log so the pipe never fills up and blocks the server.
        threading.Thread(target=self._drain, daemon=True).start()
        for attempt in range(_MAX_CONNECT_ATTEMPTS):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if attempt == _MAX_CONNECT_ATTEMPTS - 1:
                    raise

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with pytest.MonkeyPatch.context() as mp:
        # Fake credentials, and no lookups beyond loopback (instance metadata, the user's AWS config).
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        server = MotoServer()
        try:
            import boto3

            boto3.client("s3", endpoint_url=server.url).create_bucket(Bucket=_BUCKET)
            yield server
        finally:
            server.stop()


_counter = iter(range(1_000_000))


@pytest.fixture(params=["memory", "fs", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArchiveStore]:
    if request.param == "memory":
        yield MemoryArchiveStore()
    elif request.param == "fs":
        yield FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    else:
        server: MotoServer = request.getfixturevalue("moto")
        # A fresh prefix per test keeps tests apart on the shared server.
        url = f"s3://{_BUCKET}/run{next(_counter)}?endpoint_url={server.url}&path_style=true"
        s = open_archive_store(url)
        yield s
        s.close()


# -- the contract ---------------------------------------------------------------------------------------------------


def test_store_satisfies_the_protocol(store: ArchiveStore) -> None:
    assert isinstance(store, ArchiveStore)


def test_write_read_replace_and_names(store: ArchiveStore) -> None:
    assert store.read("s1", "summary-001.json") is None
    assert store.names("s1") == [] and store.sessions() == []
    store.write("s1", "summary-001.json", b"one")
    store.write("s1", "summary-001.json", b"two")
    store.write("s2", "events.jsonl", b"")
    assert store.read("s1", "summary-001.json") == b"two"
    assert store.names("s1") == ["summary-001.json"]
    assert store.sessions() == ["s1", "s2"]


def test_exclusive_write_refuses_to_replace(store: ArchiveStore) -> None:
    store.write("s1", "transcript-pre-compact-001.jsonl", b"a", exclusive=True)
    with pytest.raises(FileExistsError):
        store.write("s1", "transcript-pre-compact-001.jsonl", b"b", exclusive=True)
    assert store.read("s1", "transcript-pre-compact-001.jsonl") == b"a"


def test_append_creates_then_extends(store: ArchiveStore) -> None:
    store.append("s1", "events.jsonl", b"1\n")
    store.append("s1", "events.jsonl", b"2\n")
    assert store.read("s1", "events.jsonl") == b"1\n2\n"


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", ".hidden", "x" * 300, "a b"])
def test_bad_session_ids_are_refused(store: ArchiveStore, bad: str) -> None:
    with pytest.raises(ValueError, match="session_id"):
        store.write(bad, "events.jsonl", b"x")


def test_archive_facade_end_to_end(store: ArchiveStore) -> None:
    archive = Archive(store)
    view = [Message.user("fix the bug", meta={"id": "m1"}), Message.assistant("on it", meta={"id": "m2"})]
    assert archive.archive_transcript("sess", view) == 1
    assert archive.archive_transcript("sess", view[:1]) == 2
    archive.archive_summary("sess", 1, {"summary": "user wants the bug fixed", "input_messages": 2})
    archive.append_events("sess", [{"type": "compact.trigger_decision", "triggered": True}])
    archive.append_events("sess", [{"type": "compact.summary_created"}, {"type": "compact.pruned_messages"}])
    assert store.names("sess") == [
        "events.jsonl",
        "summary-001.json",
        "transcript-pre-compact-001.jsonl",
        "transcript-pre-compact-002.jsonl",
    ]
    assert archive.transcript("sess", 1) == view
    assert [n for n, _ in archive.transcripts("sess")] == [1, 2]
    assert archive.summary("sess", 1) == {"summary": "user wants the bug fixed", "input_messages": 2}
    assert archive.summary("sess", 2) is None
    assert [e["type"] for e in archive.events("sess")] == [
        "compact.trigger_decision",
        "compact.summary_created",
        "compact.pruned_messages",
    ]
    raw = store.read("sess", "transcript-pre-compact-001.jsonl")
    assert raw is not None
    lines = raw.decode().splitlines()
    assert [json.loads(line)["role"] for line in lines] == ["user", "assistant"]


def test_secrets_never_reach_the_store(store: ArchiveStore) -> None:
    secrets = ["sk-proj-" + "A1b2" * 12, "AKIA" + "Q" * 16, "ghp_" + "z" * 36]
    archive = Archive(store)
    view = [
        Message.user(f"my key is {secrets[0]}", meta={"id": "m1"}),
        Message.assistant("", [ToolCall("c1", "bash", json.dumps({"cmd": f"export K={secrets[1]}"}))]),
        Message.tool("c1", f"token={secrets[2]}"),
    ]
    n = archive.archive_transcript("s", view)
    archive.archive_summary("s", n, {"summary": f"the user gave {secrets[0]}"})
    archive.append_events("s", [{"type": "x", "data": {"args": [secrets[1]]}}])
    everything = b"".join(store.read("s", name) or b"" for name in store.names("s"))
    assert len(everything) > 200
    for secret in secrets:
        assert secret.encode() not in everything
    assert b"[REDACTED:openai_key]" in everything and b"[REDACTED:aws_access_key]" in everything


def test_events_skip_a_torn_last_line(store: ArchiveStore) -> None:
    store.append("s", "events.jsonl", b'{"type":"a"}\n{"type":"b"}\n{"type":"c", "da')
    assert [e["type"] for e in Archive(store).events("s")] == ["a", "b"]


def test_concurrent_archivers_get_distinct_numbers(store: ArchiveStore) -> None:
    archive = Archive(store)
    start = threading.Barrier(4)
    numbers: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        start.wait()
        for j in range(3):
            n = archive.archive_transcript("race", [Message.user(f"{i}-{j}")])
            with lock:
                numbers.append(n)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(numbers) == list(range(1, 13))
    assert sorted(m.text for _, ms in archive.transcripts("race") for m in ms) == sorted(
        f"{i}-{j}" for i in range(4) for j in range(3)
    )


# -- filesystem specifics -------------------------------------------------------------------------------------------


def test_filesystem_layout_on_disk(tmp_path: Path) -> None:
    archive = Archive(FilesystemArchiveStore(tmp_path))
    n = archive.archive_transcript("abc", [Message.user("hi")])
    archive.archive_summary("abc", n, {"summary": "s"})
    archive.append_events("abc", [{"type": "e"}])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "abc/events.jsonl",
        "abc/summary-001.json",
        "abc/transcript-pre-compact-001.jsonl",
    ]


def test_filesystem_readers_never_see_a_partial_file(tmp_path: Path) -> None:
    store = FilesystemArchiveStore(tmp_path, fsync=False)
    payloads = [b"a" * 2_000_000, b"b" * 3_000_000]
    store.write("s", "summary-001.json", payloads[0])
    done = threading.Event()
    seen: set[int] = set()

    def reader() -> None:
        while not done.is_set():
            data = store.read("s", "summary-001.json")
            assert data in payloads
            seen.add(len(data or b""))

    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            reader()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=guarded)
    t.start()
    for i in range(40):
        store.write("s", "summary-001.json", payloads[i % 2])
    done.set()
    t.join()
    assert not errors
    assert store.names("s") == ["summary-001.json"]  # no temporary file left behind


# -- S3 specifics ----------------------------------------------------------------------------------------------------


@pytest.mark.s3
def test_s3_keys_match_the_filesystem_layout(moto: MotoServer) -> None:
    import boto3

    store = open_archive_store(f"s3://{_BUCKET}/layout/deep?endpoint_url={moto.url}&path_style=1")
    archive = Archive(store)
    n = archive.archive_transcript("abc", [Message.user("hi")])
    archive.archive_summary("abc", n, {"summary": "s"})
    archive.append_events("abc", [{"type": "e"}])
    client = boto3.client("s3", endpoint_url=moto.url)
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=_BUCKET, Prefix="layout/")["Contents"])
    # Appends are chunks (S3 has no append; rewriting the whole log per batch is O(log) and races).
    assert keys == [
        "layout/deep/abc/_chunks/events.jsonl/000000000000",
        "layout/deep/abc/summary-001.json",
        "layout/deep/abc/transcript-pre-compact-001.jsonl",
    ]
    assert store.names("abc") == ["events.jsonl", "summary-001.json", "transcript-pre-compact-001.jsonl"]


@pytest.mark.s3
def test_s3_sse_kms(moto: MotoServer) -> None:
    import boto3

    key_id = boto3.client("kms", endpoint_url=moto.url).create_key()["KeyMetadata"]["KeyId"]
    store = open_archive_store(f"s3://{_BUCKET}/kms?endpoint_url={moto.url}&path_style=true&sse_kms_key_id={key_id}")
    store.write("s", "summary-001.json", b"{}")
    store.append("s", "events.jsonl", b"{}\n")
    client = boto3.client("s3", endpoint_url=moto.url)
    for key in ("summary-001.json", "_chunks/events.jsonl/000000000000"):
        head = client.head_object(Bucket=_BUCKET, Key=f"kms/s/{key}")
        assert head["ServerSideEncryption"] == "aws:kms"
        assert key_id in head["SSEKMSKeyId"]


@pytest.mark.s3
def test_s3_concurrent_appends_lose_nothing(moto: MotoServer) -> None:
    url = f"s3://{_BUCKET}/appends?endpoint_url={moto.url}&path_style=true"
    stores = [open_archive_store(url) for _ in range(3)]
    start = threading.Barrier(len(stores))

    def work(i: int) -> None:
        start.wait()
        for j in range(4):
            stores[i].append("s", "events.jsonl", f"{i}-{j}\n".encode())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = stores[0].read("s", "events.jsonl") or b""
    assert sorted(data.decode().split()) == sorted(f"{i}-{j}" for i in range(3) for j in range(4))


@pytest.mark.s3
def test_s3_missing_bucket_is_a_store_error_not_a_traceback(moto: MotoServer) -> None:
    from contextfold.errors import StoreError

    store = open_archive_store(f"s3://no-such-bucket-x/p?endpoint_url={moto.url}&path_style=true")
    with pytest.raises(StoreError, match="no-such-bucket-x"):
        store.write("s", "events.jsonl", b"x")


# -- opening by URL ---------------------------------------------------------------------------------------------------


def test_open_archive_store_by_path_and_file_url(tmp_path: Path) -> None:
    a = open_archive_store(str(tmp_path / "a"))
    b = open_archive_store((tmp_path / "b").as_uri())
    assert isinstance(a, FilesystemArchiveStore) and a.root == tmp_path / "a"
    assert isinstance(b, FilesystemArchiveStore) and b.root == tmp_path / "b"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "must not be empty"),
        ("redis://localhost/0", "unknown archive"),
        ("s3:///prefix", "no bucket"),
        ("s3://b/p?colour=red", "unknown option 'colour'"),
        ("s3://b/p?path_style=maybe", "path_style must be true or false"),
    ],
)
def test_open_archive_store_errors(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        open_archive_store(url)


def test_s3_options_reach_the_client() -> None:
    from contextfold.stores.archive_s3 import S3ArchiveStore

    store: Any = open_archive_store("s3://bkt/a/b/?endpoint_url=http://127.0.0.1:1&path_style=true&region=eu-west-1")
    assert isinstance(store, S3ArchiveStore)
    assert (store.bucket, store.prefix) == ("bkt", "a/b")
    assert store.client.meta.endpoint_url == "http://127.0.0.1:1"
    assert store.client.meta.region_name == "eu-west-1"
    assert store.client.meta.config.s3["addressing_style"] == "path"


@pytest.mark.s3
def test_s3_appends_write_new_chunks_and_never_rewrite_what_is_there(moto: MotoServer) -> None:
    import boto3

    store = open_archive_store(f"s3://{_BUCKET}/chunked?endpoint_url={moto.url}&path_style=true")
    store.write("s", "events.jsonl", b"old whole object\n")  # what earlier versions' appends left behind
    lines = [f"line {i}\n".encode() for i in range(5)]
    for line in lines:
        store.append("s", "events.jsonl", line)
    client = boto3.client("s3", endpoint_url=moto.url)
    objects = client.list_objects_v2(Bucket=_BUCKET, Prefix="chunked/s/")["Contents"]
    sizes = {o["Key"]: o["Size"] for o in objects}
    assert sizes["chunked/s/events.jsonl"] == len(b"old whole object\n")  # untouched
    chunks = sorted(k for k in sizes if "/_chunks/" in k)
    assert [sizes[k] for k in chunks] == [len(line) for line in lines]  # each append its own bytes only
    assert store.read("s", "events.jsonl") == b"old whole object\n" + b"".join(lines)
    fresh = open_archive_store(f"s3://{_BUCKET}/chunked?endpoint_url={moto.url}&path_style=true")
    fresh.append("s", "events.jsonl", b"from another process\n")  # it finds the next free number itself
    assert fresh.read("s", "events.jsonl") == b"old whole object\n" + b"".join(lines) + b"from another process\n"
    assert store.names("s") == ["events.jsonl"]


def test_every_archive_write_leaves_an_audit_line(caplog: pytest.LogCaptureFixture) -> None:
    # 004 §Risk 3: writing a transcript, a summary or events to the archive is an export, audited like the others.
    from contextfold.archive import Archive, MemoryArchiveStore
    from contextfold.messages import Message

    caplog.set_level("INFO", logger="contextfold.audit")
    archive = Archive(MemoryArchiveStore())
    n = archive.archive_transcript("s-audit", [Message.user("hello"), Message.assistant("hi")])
    archive.archive_summary("s-audit", n, {"summary": "greeted"})
    archive.append_events("s-audit", [{"name": "compact.warning"}])
    lines = [r.getMessage() for r in caplog.records if r.name == "contextfold.audit"]
    assert [line.split(" bytes=")[0] for line in lines] == [
        "archive store=MemoryArchiveStore session=s-audit object=transcript-pre-compact-001.jsonl records=2",
        "archive store=MemoryArchiveStore session=s-audit object=summary-001.json records=1",
        "archive store=MemoryArchiveStore session=s-audit object=events.jsonl records=1",
    ]
