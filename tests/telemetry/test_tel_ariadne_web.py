"""Ariadne's own web UI shows a contextfold session as a nested trace (headless Chromium, driven over DevTools).

The UI is the vendored Ariadne web app (``ariadne-serve PORT --web``), which only accepts its API from the origin
``http://127.0.0.1:5173``: the API runs on 5172 and the UI on 5173. The browser waits for its SSE stream to open
(a DevTools network event), the session is exported, and the page is checked and photographed once the spans are
drawn. Set ``CONTEXTFOLD_SCREENSHOTS=DIR`` to keep the PNG.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _ariadne_server import start_ariadne
from _session import run_session, session_manager
from conftest import require, require_binary

from contextfold.exporters.ariadne import AriadneExporter
from contextfold.telemetry import BatchProcessor

websockets = pytest.importorskip("websockets", reason="drives Chromium over the DevTools protocol")

pytestmark = [pytest.mark.ariadne, pytest.mark.browser]

API_PORT = 5172  # the UI's origin (API_PORT + 1 = 5173) is the one Ariadne's CORS allows
PATIENCE_S = 60.0
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
          "--disable-component-update", "--disable-sync", "--window-size=1680,1050"]

# Runs in the page: wait (on DOM mutations, not a timer) until a row with the given text is drawn, open it in the
# inspector, reveal its data, and answer the page's text.
_OPEN_ROW = """
new Promise((resolve) => {
  const find = () => [...document.querySelectorAll('button')].find(b => b.innerText.trim().startsWith(ROW));
  const open = () => {
    const row = find();
    row.scrollIntoView({block: 'center'});
    row.click();
    requestAnimationFrame(() => {
      const reveal = [...document.querySelectorAll('button')].find(b => b.innerText.includes('Reveal'));
      if (reveal) reveal.click();
      requestAnimationFrame(() => requestAnimationFrame(() => resolve(document.body.innerText)));
    });
  };
  if (find()) return open();
  new MutationObserver((_, observer) => { if (find()) { observer.disconnect(); open(); } })
    .observe(document.body, {childList: true, subtree: true});
})
"""


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


class DevTools:
    """One page's DevTools connection: commands answered by id, events kept by method."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.waiters: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.changed = asyncio.Condition()

    async def pump(self) -> None:
        async for raw in self.ws:
            message = json.loads(raw)
            if "id" in message and message["id"] in self.waiters:
                self.waiters.pop(message["id"]).set_result(message)
            else:
                async with self.changed:
                    self.events.append(message)
                    self.changed.notify_all()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiters[self.next_id] = future
        await self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        reply = await asyncio.wait_for(future, PATIENCE_S)
        assert "error" not in reply, reply
        return dict(reply.get("result", {}))

    async def sse_messages(self, at_least: int) -> int:
        def count() -> int:
            return sum(1 for e in self.events if e.get("method") == "Network.eventSourceMessageReceived")

        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: count() >= at_least), PATIENCE_S)
        return count()


def _devtools_page(browser: subprocess.Popen[str]) -> str:
    assert browser.stderr is not None
    for line in browser.stderr:
        if "DevTools listening on ws://" in line:
            port = line.split("ws://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=PATIENCE_S) as answer:
                pages = [t for t in json.load(answer) if t["type"] == "page"]
            return str(pages[0]["webSocketDebuggerUrl"])
    raise AssertionError("Chromium did not open its DevTools endpoint")


async def _drive(page_ws: str, web_url: str, api_url: str) -> tuple[str, str, dict[str, bytes], int]:
    async with websockets.connect(page_ws, max_size=64 * 2**20) as ws:
        tools = DevTools(ws)
        pump = asyncio.create_task(tools.pump())
        await tools.send("Network.enable")
        await tools.send("Page.enable")
        await tools.send("Page.navigate", url=web_url)
        await tools.sse_messages(1)  # the stream's "connected" message: the UI is listening
        # patient: this test is about what the UI draws, not about the end-of-session deadline
        processor = BatchProcessor(AriadneExporter(api_url), flush_timeout_s=PATIENCE_S)
        cm = session_manager(processor, session_id="ariadne-web")
        await asyncio.to_thread(run_session, cm)
        await asyncio.to_thread(cm.close)
        exporter = processor.exporter
        sent = exporter.stats().sent_events
        await tools.sse_messages(1 + sent)
        shots = {}
        for row, name in (("ariadne-web", "ariadne-session"), ("compact.summarize", "ariadne-trace")):
            script = _OPEN_ROW.replace("ROW", json.dumps(row))
            text = (await tools.send("Runtime.evaluate", expression=script, awaitPromise=True,
                                     returnByValue=True))["result"]["value"]
            shots[name] = base64.b64decode((await tools.send("Page.captureScreenshot", format="png"))["data"])
            if name == "ariadne-session":
                session_text = str(text)
        pump.cancel()
        return session_text, str(text), shots, sent


def test_ariadne_web_ui_shows_the_nested_trace(tmp_path: Path) -> None:
    chromium = require_binary("chromium")
    require(_port_free(API_PORT) and _port_free(API_PORT + 1), f"ports {API_PORT} and {API_PORT + 1} are taken")
    server = start_ariadne(web=True, port=API_PORT)
    browser = subprocess.Popen([chromium, *_FLAGS, "--remote-debugging-port=0", f"--user-data-dir={tmp_path / 'p'}",
                                "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        session_text, text, shots, sent = asyncio.run(_drive(_devtools_page(browser), server.web_url, server.url))
    finally:
        browser.kill()
        browser.wait()
        server.stop()
    for name, png in shots.items():
        shot = tmp_path / f"{name}.png"
        shot.write_bytes(png)
        if os.environ.get("CONTEXTFOLD_SCREENSHOTS"):
            shutil.copy(shot, Path(os.environ["CONTEXTFOLD_SCREENSHOTS"]) / f"issue13-{name}.png")
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    assert sent > 100
    # the session row opens the trace in the inspector: its duration and how many spans it holds
    assert "Duration" in session_text and f"Spans\n{sent - 1}" in session_text
    # the trace is named after the session and grouped under its agent; the spans nest by name
    for label in ("parser-fixer", "ariadne-web", "prepare", "compact.soft", "compact.summarize", "compact.archive",
                  "compact.summary_created", "SUMMARIZE /compact.summarize"):
        assert label in text, label
    # the inspector shows the summarization span's figures as text (data.output, the Response tab)
    assert "summarizer: extractive" in text
