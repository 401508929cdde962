"""Screen capture: a :class:`Capturer` over the mss and Windows GDI backends, giving
:class:`Frame` objects (RGB pixels + the mapping back to physical pixels).

::

    from deskpilot.capture import Capturer
    with Capturer(monitor=1, region=(0, 0, 1280, 720)) as cap:
        frame = cap.grab(size=(1024, 576))
        x, y = frame.norm_to_physical(500, 500)   # where to click for the image centre
        png = frame.png()

:func:`check_screen_visible` says whether a capture of the desktop sees the screen at all
(not on Xwayland, a Wayland session's X server: X11 windows only, black elsewhere); the
agent and the commands call it before they start, the :class:`Capturer` does not.
"""

from deskpilot.capture._base import CaptureBackend, CursorImage, CursorKind, Monitor

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
from deskpilot.capture._base import DamageBackend as DamageBackend
from deskpilot.capture._base import DamageSource as DamageSource
from deskpilot.capture._base import PointerBackend as PointerBackend
from deskpilot.capture._capturer import Capturer, Scaling, make_backend
from deskpilot.capture._frame import Frame
from deskpilot.capture._visibility import ScreenVisibility, check_screen_visible
from deskpilot.capture._visibility import auto_backend as auto_backend

__all__ = [
    "CaptureBackend",
    "Capturer",
    "CursorImage",
    "CursorKind",
    "Frame",
    "Monitor",
    "Scaling",
    "ScreenVisibility",
    "check_screen_visible",
    "make_backend",
]
