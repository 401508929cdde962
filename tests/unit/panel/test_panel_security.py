"""The panel's safety against the real uvicorn server on 127.0.0.1: cross-site requests,
DNS rebinding, the access token, body limits and input validation (issue 7's panel items).

A web page the user happens to have open can send requests to 127.0.0.1; what it can
send is what these tests send: ``text/plain`` or form bodies without a preflight, a
foreign ``Origin``, a ``Host`` of its own domain after rebinding it to 127.0.0.1.
"""

from __future__ import annotations

import base64
import socket
import struct
import zlib
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from deskpilot import imaging
from deskpilot._errors import ConfigError
from deskpilot.panel import (
    MAX_ANNOTATED_BYTES,
    MAX_INJECT_BYTES,
    InvalidPNG,
    PanelAccess,
    PanelServer,
    PanelState,
    resolve_token,
    validate_png,
)

TOKEN = "test-token-0123456789abcdef"


def png(width: int, height: int, value: int = 0) -> bytes:
    return imaging.encode_png(np.full((height, width, 3), value, dtype=np.uint8))


@pytest.fixture()
def served() -> Iterator[tuple[PanelState, PanelServer]]:
    state = PanelState(annotate="browser")
    server = PanelServer(state, port=0)
    server.start_in_thread()
    try:
        yield state, server
    finally:
        server.stop_thread()


@pytest.fixture()
def served_with_token() -> Iterator[tuple[PanelState, PanelServer]]:
    state = PanelState(annotate="browser")
    server = PanelServer(state, port=0, token=TOKEN)
    server.start_in_thread()
    try:
        yield state, server
    finally:
        server.stop_thread()


def raw_request(port: int, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (no client fixing up Host or Content-Length); status + body."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, body = data.partition(b"\r\n\r\n")
                length = [
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if length and len(body) >= length[0]:
                    break
    status = int(data.split(b" ", 2)[1])
    return status, data.partition(b"\r\n\r\n")[2]


# -- 1. cross-site requests ------------------------------------------------------------------


def test_cross_site_text_plain_inject_is_refused_and_nothing_is_queued(
    served: tuple[PanelState, PanelServer],
) -> None:
    state, server = served
    body = b'{"vlm_text": "{\\"actions\\": [{\\"name\\": \\"key\\", \\"keys\\": \\"alt+f4\\"}]}"}'
    with httpx.Client(base_url=server.url, timeout=5) as client:
        # What fetch(..., {mode: "no-cors", body: "..."}) from another site sends.
        forged = client.post(
            "/inject",
            content=body,
            headers={"content-type": "text/plain;charset=UTF-8", "origin": "https://evil.example"},
        )
        assert forged.status_code == 403 and "origin" in forged.json()["error"]
        # Same without an Origin (a client that leaves it out): still not JSON.
        plain = client.post("/inject", content=body, headers={"content-type": "text/plain"})
        assert plain.status_code == 415 and "application/json" in plain.json()["error"]
        # No content type at all (a Blob body) is not JSON either.
        bare = client.post("/inject", content=body, headers={"content-type": ""})
        assert bare.status_code == 415
        form = client.post("/inject", data={"vlm_text": "x"})
        assert form.status_code == 415
        # JSON from a foreign origin (a preflighted request the browser would send anyway).
        for origin in (
            "https://evil.example",
            "null",
            f"http://localhost:{server.port}x",
            server.url.replace("http:", "https:"),
        ):
            response = client.post("/inject", json={"vlm_text": "x"}, headers={"origin": origin})
            assert response.status_code == 403, origin
        assert state.take_injection() is None
        # The panel's own page: its origin is the one it is served from.
        own = client.post("/inject", json={"vlm_text": "ok"}, headers={"origin": server.url})
        assert own.status_code == 202
        assert state.take_injection() == "ok"
        with_charset = client.post(
            "/inject",
            content=b'{"vlm_text": "ok2"}',
            headers={"content-type": "application/json; charset=utf-8"},
        )
        assert with_charset.status_code == 202 and state.take_injection() == "ok2"


def test_foreign_origin_cannot_read_the_state_or_the_screenshot(
    served: tuple[PanelState, PanelServer],
) -> None:
    state, server = served
    state.publish(
        turn=1,
        raw_png=png(8, 8),
        image_size=(8, 8),
        observation="secret screen",
        bboxes=[],
        actions=[],
        vlm_json="{}",
    )
    with httpx.Client(base_url=server.url, timeout=5) as client:
        for path in ("/state", "/raw.png", "/config", "/"):
            refused = client.get(path, headers={"origin": "https://evil.example"})
            assert refused.status_code == 403, path
            assert "access-control-allow-origin" not in refused.headers
        # An <img>/<script> from another site sends no Origin, but Chromium marks it.
        embedded = client.get(
            "/raw.png", headers={"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"}
        )
        assert embedded.status_code == 403
        # A link from another site to the page itself is a navigation: the page loads.
        followed = client.get(
            "/",
            headers={
                "sec-fetch-site": "cross-site",
                "sec-fetch-mode": "navigate",
                "sec-fetch-dest": "document",
            },
        )
        assert followed.status_code == 200
        ok = client.get("/state", headers={"sec-fetch-site": "same-origin"})
        assert ok.status_code == 200 and ok.json()["observation"] == "secret screen"
        assert "access-control-allow-origin" not in ok.headers
        assert ok.headers["x-content-type-options"] == "nosniff"
        page = client.get("/")
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        preflight = client.options(
            "/inject",
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
        assert preflight.status_code == 403
        assert "access-control-allow-origin" not in preflight.headers


# -- 2. DNS rebinding --------------------------------------------------------------------------


def test_host_header_must_name_the_panel(served: tuple[PanelState, PanelServer]) -> None:
    _, server = served
    port = server.port
    with httpx.Client(base_url=server.url, timeout=5) as client:
        for host in (
            f"127.0.0.1:{port}",
            f"localhost:{port}",
            f"[::1]:{port}",
            f"LOCALHOST:{port}",
        ):
            assert client.get("/state", headers={"host": host}).status_code == 200, host
        for host in (
            f"evil.example:{port}",  # the rebinding attack: the attacker's name, our address
            f"127.0.0.1:{port + 1}",
            "127.0.0.1",
            f"localhost.evil.example:{port}",
            f"10.0.0.1:{port}",
        ):
            response = client.get("/state", headers={"host": host})
            assert response.status_code == 421, host
            assert response.json()["ok"] is False
        rebound = client.post(
            "/inject", json={"vlm_text": "x"}, headers={"host": f"evil.example:{port}"}
        )
        assert rebound.status_code == 421
    # HTTP/1.0 without a Host header at all.
    status, _ = raw_request(port, b"GET /state HTTP/1.0\r\n\r\n")
    assert status == 421


def test_access_rules_for_other_bind_addresses() -> None:
    loop = PanelAccess("127.0.0.1", 8765)
    assert loop.host_allowed("localhost:8765") and loop.host_allowed("[::1]:8765")
    assert not loop.host_allowed("192.168.1.5:8765") and not loop.host_allowed(None)
    lan = PanelAccess("192.168.1.5", 8765, token=TOKEN)
    assert lan.host_allowed("192.168.1.5:8765") and lan.host_allowed("127.0.0.1:8765")
    assert not lan.host_allowed("192.168.1.6:8765") and not lan.host_allowed("evil.example:8765")
    v6 = PanelAccess("fd00::5", 8765, token=TOKEN)
    assert v6.host_allowed("[fd00::5]:8765") and not v6.host_allowed("fd00::5:8765")
    # Bound to every interface: any address literal (rebinding always carries a name),
    # this machine's name, and the names configured; never another name.
    anywhere = PanelAccess("0.0.0.0", 8765, token=TOKEN, allowed_hosts=("panel.lan",))
    assert anywhere.host_allowed("10.1.2.3:8765") and anywhere.host_allowed("[fe80::1]:8765")
    assert anywhere.host_allowed(f"{socket.gethostname()}:8765")
    assert anywhere.host_allowed("panel.lan:8765") and not anywhere.host_allowed("panel.lan:80")
    assert not anywhere.host_allowed("evil.example:8765")
    on_80 = PanelAccess("127.0.0.1", 80)
    assert on_80.host_allowed("localhost") and on_80.host_allowed("localhost:80")
    assert PanelAccess("localhost", 9000, allowed_hosts=("desk:9000",)).host_allowed("desk:9000")
    with pytest.raises(ConfigError, match="token"):
        PanelAccess("0.0.0.0", 8765)
    with pytest.raises(ConfigError, match="allowed host"):
        PanelAccess("127.0.0.1", 8765, allowed_hosts=("bad host!",))


# -- 3. the token ------------------------------------------------------------------------------


def test_non_loopback_bind_without_a_token_refuses_to_start() -> None:
    state = PanelState()
    for host in ("0.0.0.0", "192.168.1.5", "::"):
        with pytest.raises(ConfigError, match="PANEL_TOKEN"):
            PanelServer(state, host=host, port=0)


def test_token_is_required_on_every_request_and_set_as_a_cookie(
    served_with_token: tuple[PanelState, PanelServer],
) -> None:
    state, server = served_with_token
    assert server.page_url == f"{server.url}/?token={TOKEN}" and TOKEN not in server.url
    with httpx.Client(base_url=server.url, timeout=5) as client:
        for path in ("/", "/state", "/config", "/static/panel.js", "/raw.png", "/nope"):
            response = client.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert client.post("/inject", json={"vlm_text": "x"}).status_code == 401
        wrong = client.get("/state", headers={"authorization": "Bearer " + TOKEN[:-1] + "X"})
        assert wrong.status_code == 401
        assert client.get("/state", params={"token": "nope"}).status_code == 401
        bearer = client.get("/state", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200
        injected = client.post(
            "/inject", json={"vlm_text": "hi"}, headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert injected.status_code == 202 and state.take_injection() == "hi"
        assert "set-cookie" not in bearer.headers
    with httpx.Client(base_url=server.url, timeout=5, follow_redirects=False) as browser:
        # The page is opened with ?token=: the answer sets the cookie and drops the token
        # from the address bar; the page's own requests then carry the cookie.
        first = browser.get("/", params={"token": TOKEN})
        assert first.status_code == 303 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert f"deskpilot_panel_{server.port}={TOKEN}" in cookie
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert attribute.lower() in cookie.lower(), attribute
        assert browser.get("/").status_code == 200
        assert browser.get("/state").status_code == 200
        posted = browser.post(
            "/inject", json={"vlm_text": "from page"}, headers={"origin": server.url}
        )
        assert posted.status_code == 202 and state.take_injection() == "from page"
        # A cookie from another port's panel does not open this one.
        browser.cookies.clear()
        browser.cookies.set(f"deskpilot_panel_{server.port + 1}", TOKEN)
        assert browser.get("/state").status_code == 401


def test_resolve_token() -> None:
    assert resolve_token("off") == (None, False)  # only an explicit choice turns it off
    assert resolve_token(" OFF ") == (None, False)
    for unset in ("", "  "):
        empty_token, empty_generated = resolve_token(unset)
        assert empty_generated and empty_token is not None and len(empty_token) >= 32
    token, generated = resolve_token("generate")
    assert generated and token is not None and len(token) >= 32
    assert resolve_token("generate")[0] != token
    assert resolve_token(TOKEN) == (TOKEN, False)
    with pytest.raises(ConfigError, match="16"):
        resolve_token("short")
    with pytest.raises(ConfigError):
        resolve_token("has space in the middle of it")


# -- 4. body limits and validation ----------------------------------------------------------


def test_declared_oversized_bodies_are_refused_before_they_are_read(
    served: tuple[PanelState, PanelServer],
) -> None:
    _, server = served
    port = server.port
    assert server.port is not None
    for path, limit in (
        ("/inject", MAX_INJECT_BYTES),
        ("/annotated", MAX_ANNOTATED_BYTES),
        ("/state", 65536),
    ):
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {limit + 1}\r\nConnection: close\r\n\r\n"
        ).encode()
        status, body = raw_request(port, head)  # no body sent: the answer comes first
        assert status == 413, (path, body)


def test_streamed_oversized_inject_is_413(served: tuple[PanelState, PanelServer]) -> None:
    state, server = served

    def chunks() -> Iterator[bytes]:
        yield b'{"vlm_text": "'
        for _ in range(MAX_INJECT_BYTES // 65536 + 1):
            yield b"x" * 65536
        yield b'"}'

    with httpx.Client(base_url=server.url, timeout=10) as client:
        response = client.post(
            "/inject", content=chunks(), headers={"content-type": "application/json"}
        )
    assert response.status_code == 413 and state.take_injection() is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"vlm_text": ""}, "empty"),
        ({"vlm_text": "   \n"}, "empty"),
        ({"vlm_text": "x", "extra": 1}, "extra"),
        ({"vlm_text": ["x"]}, "vlm_text"),
        ({"vlm_text": None}, "vlm_text"),
    ],
)
def test_inject_validates_its_body(
    served: tuple[PanelState, PanelServer], body: dict[str, object], message: str
) -> None:
    state, server = served
    with httpx.Client(base_url=server.url, timeout=5) as client:
        response = client.post("/inject", json=body)
    assert response.status_code == 422 and message in response.json()["error"]
    assert state.take_injection() is None


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_from(
    width: int, height: int, rows: bytes, *, colour: int = 2, depth: int = 8, trailer: bytes = b""
) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"IDAT", zlib.compress(rows))
        + _chunk(b"IEND", b"")
        + trailer
    )


def test_validate_png_accepts_real_images_and_refuses_broken_ones() -> None:
    good = png(64, 36, 90)
    assert validate_png(good) == (64, 36)
    assert validate_png(good, expect_size=(64, 36)) == (64, 36)
    rgba = imaging.encode_png(np.zeros((5, 7, 3), dtype=np.uint8))
    assert validate_png(rgba) == (7, 5)
    hand_made = _png_from(3, 2, b"\x00" + b"\x01" * 9 + b"\x04" + b"\x02" * 9)
    assert validate_png(hand_made) == (3, 2)
    broken = {
        "truncated": good[: len(good) // 2],
        "no IEND": good[:-12],
        "bad CRC": good[:40] + bytes([good[40] ^ 0xFF]) + good[41:],
        "trailing bytes": good + b"garbage",
        "short pixel data": _png_from(3, 2, b"\x00" + b"\x01" * 9),
        "too much pixel data": _png_from(3, 2, b"\x00" + b"\x01" * 9 + b"\x00" + b"\x01" * 10),
        "bad row filter": _png_from(3, 2, b"\x00" + b"\x01" * 9 + b"\x07" + b"\x02" * 9),
        "bad depth": _png_from(3, 2, b"\x00" * 20, depth=7),
        "zero width": _png_from(0, 2, b"\x00\x00"),
        "palette without PLTE": _png_from(3, 2, b"\x00" * 8, colour=3),
        "not zlib": b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", 3, 2, 8, 2, 0, 0, 0))
        + _chunk(b"IDAT", b"not deflate at all")
        + _chunk(b"IEND", b""),
        "gif": b"GIF89a" + b"\x00" * 40,
    }
    for name, data in broken.items():
        with pytest.raises(InvalidPNG):
            validate_png(data)
            pytest.fail(name)
    with pytest.raises(InvalidPNG, match="64x36"):
        validate_png(good, expect_size=(32, 18))


def test_annotated_validates_base64_and_the_whole_png(
    served: tuple[PanelState, PanelServer],
) -> None:
    import asyncio

    state, server = served
    state.publish(
        turn=2,
        raw_png=png(64, 36),
        image_size=(64, 36),
        observation="",
        bboxes=[],
        actions=[],
        vlm_json="{}",
    )
    good = png(64, 36, 77)

    async def engine() -> bytes:
        waiting = asyncio.ensure_future(state.wait_annotation(2, timeout=10))
        await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:

            async def post(body: dict[str, object]) -> httpx.Response:
                return await client.post("/annotated", json=body)

            truncated = base64.b64encode(good[:-30]).decode()
            assert (await post({"seq": 2, "image_b64": truncated})).status_code == 422
            jpeg_url = "data:image/jpeg;base64," + base64.b64encode(good).decode()
            refused = await post({"seq": 2, "image_b64": jpeg_url})
            assert refused.status_code == 422 and "image/png" in refused.json()["error"]
            assert (
                await post({"seq": -1, "image_b64": base64.b64encode(good).decode()})
            ).status_code == 422
            extra = await post({"seq": 2, "image_b64": base64.b64encode(good).decode(), "x": 1})
            assert extra.status_code == 422
            assert (await post({"seq": 2, "image_b64": 5})).status_code == 422
            assert not waiting.done()
            ok = await post({"seq": 2, "image_b64": base64.b64encode(good).decode()})
            assert ok.status_code == 200
        return await waiting

    assert asyncio.run(engine()) == good
