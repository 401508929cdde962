"""``deskpilot mcp --http``: streamable HTTP with a token, driven by the official SDK's
streamable-HTTP client, against a headed Chromium on Xvfb (one server for the module).

What the page saw is read over the DevTools protocol: the screen coordinates of the click
it received and the value of its text field."""

from __future__ import annotations

import contextlib
import io
import math
import os
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from _mcp import McpClient, error_text, meta, png_of
from mcp.client.streamable_http import streamable_http_client
from PIL import Image
from test_input_chromium_x11 import HeadedChromium

from deskpilot.testing._chromium import find_chromium

pytestmark = pytest.mark.x11

PAGE = """<!doctype html><html><body style="margin:0;font:24px sans-serif;background:#fff">
<button id="go" style="position:absolute;left:300px;top:200px;width:240px;height:90px">Go</button>
<input id="field" style="position:absolute;left:300px;top:400px;width:500px;height:40px;font:24px sans-serif">
<script>
window.clicks = [];
document.getElementById("go").addEventListener("click", e => window.clicks.push([e.screenX, e.screenY]));
window.where = id => {
  const r = document.getElementById(id).getBoundingClientRect();
  const top = window.screenY + (window.outerHeight - window.innerHeight);
  const left = window.screenX + (window.outerWidth - window.innerWidth) / 2;
  return [Math.round(left + r.left + r.width / 2), Math.round(top + r.top + r.height / 2)];
};
</script></body></html>"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpServer:
    """``deskpilot mcp --http`` as a process; its token read from the line it prints once."""

    def __init__(self, runs: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "deskpilot", "mcp", "--runs-dir", str(runs), "--http", f"127.0.0.1:{self.port}", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "NO_COLOR": "1"}, cwd=str(runs.parent),
        )
        self.lines: list[str] = []
        self.token: str | None = None
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("the server exited: " + "".join(self.lines))
            self.lines.append(line)
            if "serving" in line:
                if "token: " in line:
                    self.token = line.rsplit("token: ", 1)[1].strip()
                break
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            time.sleep(0.05)
        raise RuntimeError("the server does not listen")

    def client(self, token: str | None) -> McpClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return McpClient(lambda: streamable_http_client(self.url, http_client=httpx2.AsyncClient(headers=headers, timeout=60)))

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        return "".join(self.lines) + (err or "")


@pytest.fixture(scope="module")
def browser(xvfb: str) -> Iterator[tuple[HeadedChromium, str]]:
    if find_chromium() is None:
        pytest.fail("Chromium is not installed (apt-get install chromium)")
    chrome = HeadedChromium("data:text/html," + urllib.parse.quote(PAGE))
    try:
        session = chrome.page()
        chrome.wait_for(session, "typeof window.where === 'function'")
        yield chrome, session
    finally:
        chrome.close()


@pytest.fixture(scope="module")
def server(xvfb: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    runs = tmp_path_factory.mktemp("mcp-http") / "runs"
    runs.mkdir()
    served = HttpServer(runs)
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def client(server: HttpServer) -> Iterator[McpClient]:
    mcp = server.client(server.token)
    try:
        yield mcp
    finally:
        mcp.close()


def image_point(frame: dict[str, Any], x: int, y: int) -> tuple[int, int]:
    left, top, width, height = frame["screen_rect"]
    iw, ih = frame["image_size"]
    return math.floor((x - left + 0.5) * iw / width), math.floor((y - top + 0.5) * ih / height)


def documented(frame: dict[str, Any], ix: int, iy: int) -> tuple[int, int]:
    left, top, width, height = frame["screen_rect"]
    iw, ih = frame["image_size"]
    return left + math.floor((ix + 0.5) * width / iw), top + math.floor((iy + 0.5) * height / ih)


def test_the_token_is_printed_once_and_required(server: HttpServer) -> None:
    assert server.token is not None and len(server.token) >= 32
    assert sum(line.count(server.token) for line in server.lines) == 1
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    assert httpx.post(server.url, json=body, headers=headers, timeout=10).status_code == 401
    wrong = {**headers, "Authorization": "Bearer " + "x" * 43}
    assert httpx.post(server.url, json=body, headers=wrong, timeout=10).status_code == 401
    rebinding = {**headers, "Authorization": f"Bearer {server.token}", "Host": f"evil.example:{server.port}"}
    assert httpx.post(server.url, json=body, headers=rebinding, timeout=10).status_code == 421
    with pytest.raises(Exception):  # noqa: B017 - the SDK client's error for a 401
        server.client(None).close()


def test_click_and_type_in_chromium_over_http(client: McpClient, browser: tuple[HeadedChromium, str]) -> None:
    chrome, session = browser
    shot = client.call("screenshot", {"max_width": 1280, "max_height": 720})
    assert not shot.is_error, shot
    frame = meta(shot)
    assert Image.open(io.BytesIO(png_of(shot))).size == (1280, 720)
    ix, iy = image_point(frame, *chrome.evaluate(session, "window.where('go')"))
    result = client.call("click", {"x": ix, "y": iy, "frame": frame["frame"]})
    assert not result.is_error, error_text(result)
    chrome.wait_for(session, "window.clicks.length === 1")
    assert tuple(chrome.evaluate(session, "window.clicks[0]")) == documented(frame, ix, iy)
    fx, fy = image_point(frame, *chrome.evaluate(session, "window.where('field')"))
    assert not client.call("click", {"x": fx, "y": fy, "screenshot_after": False}).is_error
    text = "Grüße, 世界 ✓ 42"
    result = client.call("type_text", {"text": text})
    assert not result.is_error, error_text(result)
    assert meta(result)["typed"] == len(text)
    chrome.wait_for(session, f"document.getElementById('field').value === {text!r}")
    denied = client.call("press_keys", {"keys": "ctrl+alt+delete"})
    assert "policy_denied" in error_text(denied)


def test_binding_beyond_loopback_without_a_token_is_refused(xvfb: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deskpilot", "mcp", "--runs-dir", str(tmp_path / "runs"), "--http",
         f"0.0.0.0:{free_port()}", "--token", "off"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert "without a token" in done.stderr and "Traceback" not in done.stderr
