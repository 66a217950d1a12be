"""The report in a real browser (Debian chromium, headless): it renders, logs no console error, and shows a plot."""

from __future__ import annotations

import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from conftest import require_binary

from contextfold.cli import main

pytestmark = pytest.mark.browser

# Chromium flags for a hermetic headless run: no sandbox (containers run as root), no network side traffic.
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync"]
_TIMEOUT_S = 120


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = require_binary("chromium")
    profile = tmp_path / "profile"
    return subprocess.run([binary, *_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=_TIMEOUT_S, check=False)


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit truecolour PNG, checking its structure on the way."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, previous, at = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1 : at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            add = (0, left, up, (left + up) // 2, _paeth(left, up, corner))[kind]
            line[i] = (line[i] + add) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "contextfold-report.html"
    assert main(["replay", "--demo", "--html", str(out), "--jobs", "1"]) == 0
    return out


def test_report_renders_with_no_console_error(tmp_path: Path, report: Path) -> None:
    done = _chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", report.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<svg" in done.stdout and "model call (assistant turn)" in done.stdout
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
    assert "net::ERR" not in done.stderr  # nothing tried to load from anywhere


def test_screenshot_shows_the_plot(tmp_path: Path, report: Path) -> None:
    shot = tmp_path / "shot.png"
    # The page opens with the bill (cards and bars), then the session's token plot: both within 1,800 pixels.
    done = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1800", report.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    width, height, rows = decode_png(shot.read_bytes())
    assert (width, height) == (1200, 1800)
    bpp = len(rows[0]) // width
    colours = {row[x * bpp : x * bpp + 3] for row in rows[::3] for x in range(0, width, 3)}
    assert len(colours) > 50  # text, cards and plot, not a blank page
    # The plot's view line and the bill's bars are drawn in their blue (#1f6fd1), the window in its red (#c62828),
    # the unmanaged history's bar in its grey (#5f5f5f).
    blue, red, grey = bytes.fromhex("1f6fd1"), bytes.fromhex("c62828"), bytes.fromhex("5f5f5f")
    found = {row[x * bpp : x * bpp + 3] for row in rows for x in range(width)}
    assert blue in found and red in found and grey in found
