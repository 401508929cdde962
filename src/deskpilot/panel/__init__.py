"""The local web panel of the stateless mode (seed 004): live view, engine state, injection.

::

    from deskpilot.panel import PanelServer, PanelState

    state = PanelState(config={"ui": style.to_ui_config()})
    server = PanelServer(state, port=0)
    await server.start()            # inside the engine's event loop
    print(server.url)               # http://127.0.0.1:<port>
    state.publish(turn=1, raw_png=png, image_size=(w, h), ...)
    annotated = await state.wait_annotation(1, timeout=30)   # --annotate browser

The HTTP API is described in :mod:`deskpilot.panel._app`.
"""

from deskpilot.panel._app import MAX_ANNOTATED_BYTES, MAX_INJECT_BYTES, create_app
from deskpilot.panel._server import PanelServer
from deskpilot.panel._state import PHASES, AnnotationRejected, PanelState, png_size

__all__ = [
    "MAX_ANNOTATED_BYTES",
    "MAX_INJECT_BYTES",
    "PHASES",
    "AnnotationRejected",
    "PanelServer",
    "PanelState",
    "create_app",
    "png_size",
]
