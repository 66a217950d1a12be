"""The S3 archive when the answer to a conditional PUT is lost after the object was stored.

Found on afa4c7c against moto_server behind a loopback proxy that stores the first chosen PUT and then drops the
connection instead of answering (a reset connection, a proxy's 5xx after the upload landed). botocore sends the PUT
again; its ``If-None-Match: *`` copy is refused (412) by the object the first one stored, and the store took that for
another writer's:

- an events append claimed the next chunk number and wrote the batch again: every event of the batch twice;
- a compaction's transcript went to the next number: archived as 001 and 002, the summary filed under 002, and
  ``status`` counting two compactions.

Each conditional write now carries its own mark as object metadata; a refused PUT whose object bears the mark is
the same write, answered at last.

Found on that fix (review of s19f): AWS answers 409 ConditionalRequestConflict while another conditional write of
the key is in flight, and that write may fail and leave the key free; the store took the 409 for a taken key at once:
a compaction's transcript went to 002 with 001 free, an append skipped a number. The same key is now tried again.
"""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Callable, Iterator

import pytest
from conftest import running_moto

from contextfold.archive import Archive
from contextfold.messages import Message
from contextfold.stores.archive_s3 import S3ArchiveStore
from contextfold.testing.services import MotoServer

pytestmark = pytest.mark.s3

BUCKET = "rt22-lost-answers"
# Headers of one hop only: the proxy sets its own framing.
_HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
                          "content-length"})


_IN_FLIGHT_ANSWER = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ConditionalRequestConflict</Code>'
                     b"<Message>A conflicting conditional operation is currently in progress against this resource."
                     b" Please try again.</Message></Error>")


class AnswerDroppingProxy:
    """A reverse proxy to ``upstream``: the first request ``chosen(method, path)`` picks is carried out upstream,
    and its answer dropped with the connection (or, ``in_flight``, not carried out but answered as AWS answers a
    conditional PUT while another one of the key is in flight); everything else is relayed as it is."""

    def __init__(self, upstream_port: int, chosen: Callable[[str, str], bool], *, in_flight: bool = False) -> None:
        self.dropped: list[tuple[str, str]] = []
        proxy = self

        class Relay(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def relay(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                if in_flight and not proxy.dropped and chosen(self.command, self.path):
                    proxy.dropped.append((self.command, self.path))
                    self.send_response(409)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(_IN_FLIGHT_ANSWER)))
                    self.end_headers()
                    self.wfile.write(_IN_FLIGHT_ANSWER)
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                upstream.close()
                if not proxy.dropped and chosen(self.command, self.path):
                    proxy.dropped.append((self.command, self.path))
                    self.close_connection = True  # stored upstream; the client hears nothing back
                    return
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in _HOP_HEADERS:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = relay

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with running_moto(BUCKET) as server:
        yield server


@pytest.fixture
def through_proxy(moto: MotoServer, request: pytest.FixtureRequest) -> Iterator[Callable[..., tuple]]:
    made: list[tuple[AnswerDroppingProxy, S3ArchiveStore]] = []

    def make(chosen: Callable[[str, str], bool], *, in_flight: bool = False) -> tuple[AnswerDroppingProxy,
                                                                                      S3ArchiveStore]:
        proxy = AnswerDroppingProxy(moto.port, chosen, in_flight=in_flight)
        store = S3ArchiveStore(BUCKET, f"{request.node.name}", endpoint_url=proxy.url, path_style=True,
                               region="us-east-1")
        made.append((proxy, store))
        return proxy, store

    yield make
    for proxy, store in made:
        store.close()
        proxy.close()


def test_an_append_whose_answer_was_lost_is_written_once(through_proxy: Callable[..., tuple]) -> None:
    proxy, store = through_proxy(lambda method, path: method == "PUT" and "/_chunks/" in path)
    store.append("s1", "events.jsonl", b'{"event": 1}\n')
    assert len(proxy.dropped) == 1  # the fault happened
    store.append("s1", "events.jsonl", b'{"event": 2}\n')
    assert store.read("s1", "events.jsonl") == b'{"event": 1}\n{"event": 2}\n'


def test_a_transcript_whose_answer_was_lost_keeps_its_number(through_proxy: Callable[..., tuple]) -> None:
    proxy, store = through_proxy(lambda method, path: method == "PUT" and "transcript-pre-compact" in path)
    archive = Archive(store)
    assert archive.archive_transcript("s1", [Message.user("only once")]) == 1
    assert len(proxy.dropped) == 1
    assert archive.transcript_numbers("s1") == [1]
    assert [m.text for m in archive.transcript("s1", 1)] == ["only once"]


def test_a_number_another_writer_holds_is_still_passed_over(through_proxy: Callable[..., tuple]) -> None:
    _, store = through_proxy(lambda method, path: False)
    store.write("s1", "transcript-pre-compact-001.jsonl", b"", exclusive=True)  # another writer's (no mark of ours)
    with pytest.raises(FileExistsError):
        store.write("s1", "transcript-pre-compact-001.jsonl", b"x", exclusive=True)
    store.append("s1", "events.jsonl", b"a\n")
    other = S3ArchiveStore(BUCKET, store.prefix, client=store.client)  # a second writer, its own idea of the numbers
    other.append("s1", "events.jsonl", b"b\n")
    store.append("s1", "events.jsonl", b"c\n")  # its next number is other's: it moves past it
    assert store.read("s1", "events.jsonl") == b"a\nb\nc\n"


def test_a_transcript_refused_while_another_write_is_in_flight_keeps_its_number(
        through_proxy: Callable[..., tuple]) -> None:
    proxy, store = through_proxy(lambda method, path: method == "PUT" and "transcript-pre-compact" in path,
                                 in_flight=True)
    archive = Archive(store)
    assert archive.archive_transcript("s1", [Message.user("first")]) == 1  # s19f: 2 (001 left free)
    assert len(proxy.dropped) == 1
    assert archive.transcript_numbers("s1") == [1]


def test_an_append_refused_while_another_write_is_in_flight_takes_that_number(
        through_proxy: Callable[..., tuple]) -> None:
    proxy, store = through_proxy(lambda method, path: method == "PUT" and "/_chunks/" in path, in_flight=True)
    store.append("s1", "events.jsonl", b"a\n")
    store.append("s1", "events.jsonl", b"b\n")
    assert len(proxy.dropped) == 1
    assert store.read("s1", "events.jsonl") == b"a\nb\n"
    chunks = [key.rsplit("/", 1)[1] for key in store._chunk_keys("s1", "events.jsonl")]
    assert chunks == ["000000000000", "000000000001"]  # s19f: 1 and 2
