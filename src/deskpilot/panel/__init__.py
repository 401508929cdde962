"""The local web panel of the stateless mode (seed 004): live view, engine state, injection.

::

    from deskpilot.panel import PanelServer, PanelState, style_to_ui_config

    state = PanelState(config={"ui": style_to_ui_config(style)})
    server = PanelServer(state, port=0)
    await server.start()            # inside the engine's event loop
    print(server.url)               # http://127.0.0.1:<port>
    state.publish(turn=1, raw_png=png, image_size=(w, h), ...)
    annotated = await state.wait_annotation(1, timeout=30)   # --annotate browser

The HTTP API is described in :mod:`deskpilot.panel._app`, who may use it (Host, Origin,
token, content type, body size) in :mod:`deskpilot.panel._access`. Beyond loopback the
panel needs a token::

    token, generated = resolve_token("generate")       # or the PANEL_TOKEN value
    server = PanelServer(state, host="0.0.0.0", port=8765, token=token)
    print(server.page_url)                             # http://127.0.0.1:8765/?token=...
"""

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
from deskpilot.panel._access import AccessGuard as AccessGuard
from deskpilot.panel._access import PanelAccess, resolve_token
from deskpilot.panel._app import MAX_ANNOTATED_BYTES, MAX_INJECT_BYTES
from deskpilot.panel._png import InvalidPNG, validate_png
from deskpilot.panel._server import PanelServer
from deskpilot.panel._state import AnnotationRejected, PanelState, png_size
from deskpilot.panel._ui_config import parse_color, style_from_ui_config, style_to_ui_config

__all__ = [
    "MAX_ANNOTATED_BYTES",
    "MAX_INJECT_BYTES",
    "AnnotationRejected",
    "InvalidPNG",
    "PanelAccess",
    "PanelServer",
    "PanelState",
    "parse_color",
    "png_size",
    "resolve_token",
    "style_from_ui_config",
    "style_to_ui_config",
    "validate_png",
]
