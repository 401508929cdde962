"""The panel's HTTP API against the real uvicorn server on 127.0.0.1 (httpx), incl. 409 and bad bodies."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from deskpilot import imaging
from deskpilot._errors import ConfigError
from deskpilot.panel import MAX_INJECT_BYTES, AnnotationRejected, PanelServer, PanelState, png_size


def png(width: int, height: int, value: int = 0) -> bytes:
    return imaging.encode_png(np.full((height, width, 3), value, dtype=np.uint8))


@pytest.fixture()
def served() -> Iterator[tuple[PanelState, str]]:
    state = PanelState(
        config={"ui": {"executed_heat": {"enabled": True}}, "capture_width": 64}, annotate="browser"
    )
    server = PanelServer(state, port=0)
    server.start_in_thread()
    try:
        yield state, server.url
    finally:
        server.stop_thread()


def publish(state: PanelState, turn: int = 1, size: tuple[int, int] = (64, 36)) -> bytes:
    raw = png(*size, value=turn)
    state.publish(
        turn=turn,
        raw_png=raw,
        image_size=size,
        observation=f"story {turn}",
        bboxes=[{"x1": 1, "y1": 2, "x2": 3, "y2": 4}],
        actions=[{"name": "click", "x1": 500, "y1": 500}],
        vlm_json='{"observation": "story"}',
        trail=[[{"name": "move", "x1": 1, "y1": 1}]],
        rejected=[{"kind": "action", "index": 1, "reason": "unknown action 'fly'"}],
    )
    return raw


# -- pages and reads ---------------------------------------------------------------------------------


def test_page_static_files_and_config(served: tuple[PanelState, str]) -> None:
    _, url = served
    with httpx.Client(base_url=url, timeout=5) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "/static/panel.js" in page.text
        js = client.get("/static/panel.js")
        assert js.status_code == 200 and "drawOverlays" in js.text
        assert client.get("/static/panel.css").status_code == 200
        missing = client.get("/static/../../_state.py")
        assert missing.status_code == 404
        assert client.get("/static/secret.py").json()["ok"] is False
        config = client.get("/config").json()
        assert config == {
            "ui": {"executed_heat": {"enabled": True}},
            "capture_width": 64,
            "annotate": "browser",
        }


def test_state_snapshot_and_images(served: tuple[PanelState, str]) -> None:
    state, url = served
    with httpx.Client(base_url=url, timeout=5) as client:
        first = client.get("/state").json()
        assert first["phase"] == "starting" and first["turn"] == 0 and first["raw_b64"] is None
        assert client.get("/raw.png").status_code == 404
        raw = publish(state, turn=3)
        body = client.get("/state").json()
        assert base64.b64decode(body["raw_b64"]) == raw
        assert body["turn"] == 3 and body["pending_seq"] == 3 and body["msg_id"] == 1
        assert body["observation"] == "story 3" and body["actions"] == [
            {"name": "click", "x1": 500, "y1": 500}
        ]
        assert (
            body["bboxes"] == [{"x1": 1, "y1": 2, "x2": 3, "y2": 4}]
            and body["vlm_json"] == '{"observation": "story"}'
        )
        assert body["trail"] == [[{"name": "move", "x1": 1, "y1": 1}]] and body["image_size"] == [
            64,
            36,
        ]
        assert set(body) >= {
            "phase",
            "error",
            "turn",
            "msg_id",
            "pending_seq",
            "annotated_seq",
            "raw_b64",
            "bboxes",
            "actions",
            "observation",
            "vlm_json",
        }
        light = client.get("/state", params={"images": "0"}).json()
        assert light["raw_b64"] is None and light["msg_id"] == 1
        image = client.get("/raw.png")
        assert (
            image.status_code == 200
            and image.content == raw
            and image.headers["content-type"] == "image/png"
        )
        state.set_annotated(3, png(64, 36, 200))
        assert client.get("/annotated.png").content == png(64, 36, 200)
        state.set_phase("error", "model server down")
        assert client.get("/state").json()["error"] == "model server down"
    with pytest.raises(ValueError):
        state.set_phase("sleeping")


# -- inject --------------------------------------------------------------------------------------------


def test_inject_reaches_a_waiting_engine_on_another_loop(served: tuple[PanelState, str]) -> None:
    state, url = served

    async def engine() -> list[str]:
        waiting = asyncio.ensure_future(state.next_injection(timeout=5))
        await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=url, timeout=5) as client:
            response = await client.post("/inject", json={"vlm_text": '{"observation": "go"}'})
            assert response.status_code == 202 and response.json() == {"ok": True, "queued": 1}
            first = await waiting
            await client.post("/inject", json={"vlm_text": "second"})
        return [first, await state.next_injection(timeout=1)]

    assert asyncio.run(engine()) == ['{"observation": "go"}', "second"]
    with pytest.raises(TimeoutError):
        asyncio.run(state.next_injection(timeout=0.05))


def test_inject_takes_a_plain_model_reply(served: tuple[PanelState, str]) -> None:
    """The model's JSON posted as it is (what a user pastes) is injected verbatim; the
    {"vlm_text": ...} form still works."""
    state, url = served
    reply = b'{"observation": "a button",  "actions": [{"name": "click", "x1": 500, "y1": 500}]}'
    with httpx.Client(base_url=url, timeout=5) as client:
        plain = client.post("/inject", content=reply, headers={"content-type": "application/json"})
        assert plain.status_code == 202 and plain.json() == {"ok": True, "queued": 1}
        assert state.take_injection() == reply.decode()
        wrapped = client.post("/inject", json={"vlm_text": "any text"})
        assert wrapped.status_code == 202 and state.take_injection() == "any text"
        neither = client.post("/inject", json={"text": "x"})
        assert neither.status_code == 422 and '{"vlm_text"' in neither.json()["error"]
        assert "observation" in neither.json()["error"]


@pytest.mark.parametrize(
    ("kwargs", "status", "message"),
    [
        (
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            400,
            "not JSON",
        ),
        ({"json": ["vlm_text"]}, 422, "JSON object"),
        ({"json": {"text": "x"}}, 422, "vlm_text"),
        ({"json": {"vlm_text": 5}}, 422, "vlm_text"),
        (
            {
                "content": b"x" * (MAX_INJECT_BYTES + 1),
                "headers": {"content-type": "application/json"},
            },
            413,
            "limit",
        ),
        (
            {
                "content": b'{"vlm_text": "x"}',
                "headers": {"content-type": "application/x-www-form-urlencoded"},
            },
            415,
            "application/json",
        ),
    ],
)
def test_inject_bad_bodies(
    served: tuple[PanelState, str], kwargs: dict[str, object], status: int, message: str
) -> None:
    state, url = served
    with httpx.Client(base_url=url, timeout=5) as client:
        response = client.post("/inject", **kwargs)  # type: ignore[arg-type]
    assert response.status_code == status
    body = response.json()
    assert body["ok"] is False and message in body["error"]
    assert state.take_injection() is None


def test_unknown_routes_and_methods_answer_json(served: tuple[PanelState, str]) -> None:
    _, url = served
    with httpx.Client(base_url=url, timeout=5) as client:
        assert client.get("/nope").status_code == 404
        wrong = client.get("/inject")
        assert wrong.status_code == 405 and wrong.json()["ok"] is False


# -- annotated --------------------------------------------------------------------------------------------


def test_annotated_seq_mismatch_is_409_and_the_engine_keeps_waiting(
    served: tuple[PanelState, str],
) -> None:
    state, url = served
    publish(state, turn=2)
    good = png(64, 36, 77)

    async def engine() -> bytes:
        waiting = asyncio.ensure_future(state.wait_annotation(2, timeout=5))
        await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=url, timeout=5) as client:
            snapshot = (await client.get("/state", params={"images": 0})).json()
            assert (
                snapshot["phase"] == "waiting_annotated" and snapshot["waiting_annotation"] is True
            )
            stale = await client.post(
                "/annotated", json={"seq": 1, "image_b64": base64.b64encode(good).decode()}
            )
            assert stale.status_code == 409 and stale.json()["pending_seq"] == 2
            # The seq is checked before the image body: a stale seq is 409 whatever the
            # image is (not base64, not a PNG data URL, empty, missing).
            for image in ("!!!not base64!!!", "data:image/gif;base64,R0lG", "", None):
                body = {"seq": 1} if image is None else {"seq": 1, "image_b64": image}
                stale_bad = await client.post("/annotated", json=body)
                assert stale_bad.status_code == 409, (image, stale_bad.text)
                assert stale_bad.json()["pending_seq"] == 2
            assert not waiting.done()
            small = await client.post(
                "/annotated", json={"seq": 2, "image_b64": base64.b64encode(png(10, 10)).decode()}
            )
            assert small.status_code == 422 and "64x36" in small.json()["error"]
            not_png = await client.post(
                "/annotated", json={"seq": 2, "image_b64": base64.b64encode(b"GIF89a....").decode()}
            )
            assert not_png.status_code == 422
            bad64 = await client.post(
                "/annotated", json={"seq": 2, "image_b64": "!!!not base64!!!"}
            )
            assert bad64.status_code == 422 and "base64" in bad64.json()["error"]
            for body in (
                {"seq": "2", "image_b64": "x"},
                {"seq": True, "image_b64": "x"},
                {"seq": 2},
                {"seq": 2, "image_b64": ""},
            ):
                assert (await client.post("/annotated", json=body)).status_code == 422
            assert not waiting.done()
            data_url = "data:image/png;base64," + base64.b64encode(good).decode()
            ok = await client.post("/annotated", json={"seq": 2, "image_b64": data_url})
            assert ok.status_code == 200 and ok.json() == {"ok": True, "seq": 2}
            received = await waiting
            again = await client.post(
                "/annotated", json={"seq": 2, "image_b64": base64.b64encode(good).decode()}
            )
            assert again.status_code == 409  # already delivered: nothing waits any more
            after = (await client.get("/state", params={"images": 0})).json()
            assert after["annotated_seq"] == 2 and after["waiting_annotation"] is False
            assert (await client.get("/annotated.png")).content == good
        return received

    assert asyncio.run(engine()) == good


def test_annotated_with_nobody_waiting_is_409(served: tuple[PanelState, str]) -> None:
    state, url = served
    publish(state, turn=1)
    with httpx.Client(base_url=url, timeout=5) as client:
        response = client.post(
            "/annotated", json={"seq": 1, "image_b64": base64.b64encode(png(64, 36)).decode()}
        )
    assert response.status_code == 409 and "not waiting" in response.json()["error"]


def test_wait_annotation_without_a_timeout_waits_until_posted_or_cancelled() -> None:
    state = PanelState()
    image = png(4, 4)

    async def posted_late() -> bytes:
        waiting = asyncio.ensure_future(state.wait_annotation(3, timeout=None))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        state.submit_annotation(3, image)
        return await waiting

    assert asyncio.run(posted_late()) == image

    async def cancelled() -> bool:
        waiting = asyncio.ensure_future(state.wait_annotation(4, timeout=None))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return state.snapshot(images=False)["waiting_annotation"]

    assert asyncio.run(cancelled()) is False


def test_wait_annotation_times_out() -> None:
    state = PanelState()
    with pytest.raises(TimeoutError):
        asyncio.run(state.wait_annotation(1, timeout=0.05))
    assert state.snapshot(images=False)["waiting_annotation"] is False
    with pytest.raises(AnnotationRejected) as info:
        state.submit_annotation(1, png(4, 4))
    assert info.value.status == 409


# -- server lifecycle -----------------------------------------------------------------------------------


def test_taken_port_is_a_clear_config_error() -> None:
    state = PanelState()
    first = PanelServer(state, port=0)
    first.start_in_thread()
    try:
        assert first.port is not None
        with pytest.raises(ConfigError, match="cannot listen"):
            PanelServer(state, port=first.port).start_in_thread()
    finally:
        first.stop_thread()


def test_server_in_the_callers_loop_starts_and_stops() -> None:
    async def main() -> int:
        server = PanelServer(PanelState(), port=0)
        await server.start()
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
            status = (await client.get("/state")).status_code
        await server.stop()
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(base_url=server.url, timeout=2) as client:
                await client.get("/state")
        return status

    assert asyncio.run(main()) == 200


def test_png_size() -> None:
    assert png_size(png(7, 3)) == (7, 3)
    assert png_size(b"\x89PNG\r\n\x1a\n") is None
    assert png_size(b"not a png at all, definitely not") is None
