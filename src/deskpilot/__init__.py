"""deskpilot: fast screen capture with a Cython core, and a desktop agent built on it.

Library use::

    import deskpilot
    with deskpilot.Capturer() as cap:
        frame = cap.grab(size=(1536, 864))
        png_bytes = frame.png()
"""

from __future__ import annotations

from deskpilot._errors import DeskpilotError
from deskpilot._version import __version__

# Not typing.TYPE_CHECKING: the CLI's start-up stays short (see deskpilot._errors).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from deskpilot.capture import Capturer, Frame
    from deskpilot.input import InputController

__all__ = ["Capturer", "DeskpilotError", "Frame", "InputController", "__version__"]

# Capture and input pull in numpy, mss and ctypes declarations; import them on first
# use so that `import deskpilot` (and the CLI's --help) stays cheap.
_LAZY = {
    "Capturer": "deskpilot.capture",
    "Frame": "deskpilot.capture",
    "InputController": "deskpilot.input",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'deskpilot' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
