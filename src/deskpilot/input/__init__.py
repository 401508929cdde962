"""Mouse and keyboard input: one :class:`InputController` over every backend.

Backends: ``sendinput`` (Windows), ``xtest`` (X11), ``dry`` (records, touches nothing).
All coordinates are physical virtual-desktop pixels; map model coordinates with
:class:`deskpilot.geometry.Mapping` (or :meth:`deskpilot.capture.Frame.norm_to_physical`).
"""

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
from deskpilot.input._base import Button, InputBackend
from deskpilot.input._controller import InputArgumentError, InputController, make_backend
from deskpilot.input._dry import DryBackend
from deskpilot.input._keys import KEY_NAMES, KeySpec, parse_combo
from deskpilot.input._keys import SHIFTED_KEYS as SHIFTED_KEYS
from deskpilot.input._keys import resolve_key as resolve_key
from deskpilot.input._perform import Hands, perform

__all__ = [
    "KEY_NAMES",
    "Button",
    "DryBackend",
    "Hands",
    "InputArgumentError",
    "InputBackend",
    "InputController",
    "KeySpec",
    "make_backend",
    "parse_combo",
    "perform",
]
