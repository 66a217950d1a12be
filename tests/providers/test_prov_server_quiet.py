"""The scripted server says nothing when a client goes away, and still reports its own errors."""

from __future__ import annotations

import pytest

from contextfold.testing import ScriptedLLMServer


def _handled(server: ScriptedLLMServer, error: BaseException) -> None:
    httpd = server._httpd
    assert httpd is not None
    try:
        raise error
    except type(error):
        httpd.handle_error(None, ("127.0.0.1", 9))  # (as socketserver calls it, inside the handler's except)


def test_a_client_that_went_away_prints_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedLLMServer() as server:
        _handled(server, ConnectionResetError(104, "Connection reset by peer"))
        _handled(server, BrokenPipeError(32, "Broken pipe"))
    assert capsys.readouterr().err == ""


def test_an_error_of_the_server_is_still_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedLLMServer() as server:
        _handled(server, KeyError("server-side bug"))
    err = capsys.readouterr().err
    assert "KeyError" in err and "server-side bug" in err
