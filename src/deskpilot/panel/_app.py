"""The panel's HTTP API (seed 004) as a Starlette app.

==========================  =================================================================
``GET /``                   the panel page (static/panel.html, .js, .css)
``GET /config``             ``{"ui": UI_CONFIG, "capture_width", "capture_height", "annotate", ...}``
``GET /state``              the engine state; ``?images=0`` leaves out ``raw_b64``
``GET /raw.png``            this turn's screenshot; ``/annotated.png`` its annotated version
``POST /inject``            a model output -> 202, queued for the engine: the model's JSON itself
                            (``{"observation": ..., "bboxes": [...], "actions": [...]}``), or
                            ``{"vlm_text": "<model output as text>"}`` (any text, as a model wrote it)
``POST /annotated``         ``{"seq": N, "image_b64": "<png>"}`` -> 200; 409 when N is not the
                            pending seq (the engine keeps waiting), checked before the image
==========================  =================================================================

Every request first passes :class:`~deskpilot.panel._access.AccessGuard`: 421 for a
``Host`` that does not name the panel (DNS rebinding), 403 for another site's request,
401 without the token when one is set, 415 for a POST body that is not
``application/json``, 413 for a declared body over the route's limit. The handlers then
answer 400 (not JSON), 413 (a streamed body over the limit) and 422 (JSON of the wrong
shape: unknown keys, wrong types, an empty ``vlm_text``, a negative ``seq``, base64 that is
not base64, a PNG that is not complete and well formed, or not the screenshot's size).
Unlike the seed there are no permissive CORS headers: the page is served from the same
origin, and a cross-site page must not be able to drive the desktop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import importlib.resources
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from deskpilot.panel._access import AccessGuard, PanelAccess
from deskpilot.panel._png import InvalidPNG, validate_png
from deskpilot.panel._state import AnnotationRejected, PanelState

__all__ = ["MAX_ANNOTATED_BYTES", "MAX_INJECT_BYTES", "MAX_OTHER_BYTES", "create_app"]

#: Request body limits (a 4K PNG in base64 is well under 32 MB).
MAX_INJECT_BYTES = 1 << 20
MAX_ANNOTATED_BYTES = 32 << 20
#: Any other POST (every other route answers 405, but its body is not read either).
MAX_OTHER_BYTES = 64 << 10
_INJECT_KEYS = frozenset({"vlm_text"})
#: A body with one of these (and no ``vlm_text``) is a model reply posted as it is.
_REPLY_KEYS = frozenset({"observation", "bboxes", "actions"})
_ANNOTATED_KEYS = frozenset({"seq", "image_b64"})
_PNG_DATA_URL = "data:image/png;base64,"

_STATIC = {
    "panel.js": "text/javascript; charset=utf-8",
    "panel.css": "text/css; charset=utf-8",
}
_NO_CACHE = {"Cache-Control": "no-store"}


class _HTTPError(Exception):
    """An error answer of one route; :func:`_handler` turns it into the JSON response, so it
    never leaves this module (not a DeskpilotError)."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def _json(body: Any, status: int = 200) -> Response:
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=_NO_CACHE
    )


def _error(status: int, message: str, **extra: Any) -> Response:
    return _json({"ok": False, "error": message, **extra}, status)


def _static_text(name: str) -> bytes:
    return importlib.resources.files("deskpilot.panel").joinpath("static", name).read_bytes()


async def _read_json(request: Request, limit: int) -> dict[str, Any]:
    # The access guard already refused other types; checked again so the handlers never
    # depend on the middleware being in front of them.
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise _HTTPError(
            415, f"send the body as application/json, not {content_type or 'no content type'}"
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _HTTPError(413, f"body of {declared} bytes is over the limit of {limit}")
    return (await _read_json_raw(request, limit))[0]


async def _read_json_raw(request: Request, limit: int) -> tuple[dict[str, Any], bytes]:
    """The body as a JSON object, and its bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _HTTPError(413, f"body is over the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _HTTPError(400, f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _HTTPError(422, f"body must be a JSON object, got {type(data).__name__}")
    return data, raw


def _only_keys(data: dict[str, Any], allowed: frozenset[str]) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise _HTTPError(
            422,
            f"extra keys {', '.join(map(repr, extra))}: the body takes only {', '.join(sorted(allowed))}",
        )


def _handler(
    fn: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except _HTTPError as exc:
            return _error(exc.status, exc.message, **exc.extra)

    return wrapped


def create_app(state: PanelState, access: PanelAccess) -> AccessGuard:
    """The panel app over one engine state, behind ``access`` (see :mod:`._access`)."""

    async def index(request: Request) -> Response:
        return Response(
            _static_text("panel.html"), media_type="text/html; charset=utf-8", headers=_NO_CACHE
        )

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        media = _STATIC.get(name)
        if media is None:
            return _error(404, f"no static file {name!r}")
        return Response(_static_text(name), media_type=media, headers=_NO_CACHE)

    async def config(request: Request) -> Response:
        return _json({**state.config_payload, "annotate": state.annotate})

    async def get_state(request: Request) -> Response:
        images = request.query_params.get("images", "1").lower() not in ("0", "false", "no")
        return _json(state.snapshot(images=images))

    async def image(request: Request) -> Response:
        which = "raw" if request.url.path.endswith("/raw.png") else "annotated"
        data = state.image(which)
        if data is None:
            return _error(404, f"no {which} image yet")
        return Response(data, media_type="image/png", headers=_NO_CACHE)

    async def inject(request: Request) -> Response:
        data, raw = await _read_json_raw(request, MAX_INJECT_BYTES)
        if "vlm_text" not in data and _REPLY_KEYS & set(data):
            # The model's reply as it is (what a user copies from a model): injected verbatim.
            return _json({"ok": True, "queued": state.inject(raw.decode("utf-8"))}, 202)
        if "vlm_text" not in data:
            raise _HTTPError(
                422,
                'body needs a model output: the model\'s JSON ({"observation": ..., "actions": [...]}) '
                'or {"vlm_text": "<model output>"}',
            )
        _only_keys(data, _INJECT_KEYS)
        text = data.get("vlm_text")
        if not isinstance(text, str):
            raise _HTTPError(422, 'body needs "vlm_text": a string with the model output to inject')
        if not text.strip():
            raise _HTTPError(422, "vlm_text is empty: inject the model output to run")
        queued = state.inject(text)
        return _json({"ok": True, "queued": queued}, 202)

    async def annotated(request: Request) -> Response:
        data = await _read_json(request, MAX_ANNOTATED_BYTES)
        _only_keys(data, _ANNOTATED_KEYS)
        seq = data.get("seq")
        image_b64 = data.get("image_b64")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise _HTTPError(
                422, 'body needs "seq": the integer pending_seq from /state (0 or more)'
            )
        try:
            # A stale seq is 409 whatever the image holds (even no image, or not base64):
            # checked before any of the image body is looked at.
            state.check_annotation_seq(seq)
        except AnnotationRejected as exc:
            raise _HTTPError(exc.status, str(exc), pending_seq=state.pending_seq) from None
        if not isinstance(image_b64, str) or not image_b64:
            raise _HTTPError(422, 'body needs "image_b64": the annotated PNG in base64')
        if image_b64.startswith("data:"):
            if not image_b64.startswith(_PNG_DATA_URL):
                raise _HTTPError(422, f"image_b64 as a data URL must start with {_PNG_DATA_URL}")
            image_b64 = image_b64[len(_PNG_DATA_URL) :]
        try:
            png = base64.b64decode(image_b64, validate=True)
        except (binascii.Error, ValueError):
            raise _HTTPError(422, "image_b64 is not valid base64") from None
        try:
            state.check_annotation_seq(seq)  # again: the engine may have moved on meanwhile
            # Inflating the whole image takes a few ms: off the loop the engine runs on.
            await asyncio.to_thread(validate_png, png, expect_size=state.image_size)
        except InvalidPNG as exc:
            raise _HTTPError(422, f"image_b64 is not a usable PNG: {exc}") from None
        except AnnotationRejected as exc:
            raise _HTTPError(exc.status, str(exc), pending_seq=state.pending_seq) from None
        try:
            state.submit_annotation(seq, png)
        except AnnotationRejected as exc:
            raise _HTTPError(exc.status, str(exc), pending_seq=state.pending_seq) from None
        return _json({"ok": True, "seq": seq})

    routes = [
        Route("/", _handler(index), methods=["GET"]),
        Route("/static/{name}", _handler(static), methods=["GET"]),
        Route("/config", _handler(config), methods=["GET"]),
        Route("/state", _handler(get_state), methods=["GET"]),
        Route("/raw.png", _handler(image), methods=["GET"]),
        Route("/annotated.png", _handler(image), methods=["GET"]),
        Route("/inject", _handler(inject), methods=["POST"]),
        Route("/annotated", _handler(annotated), methods=["POST"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return _error(status, str(detail))

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    return AccessGuard(
        app,
        access,
        body_limits={"/inject": MAX_INJECT_BYTES, "/annotated": MAX_ANNOTATED_BYTES},
        default_limit=MAX_OTHER_BYTES,
    )
