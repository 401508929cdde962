"""Public re-export of the exception hierarchy (see :class:`DeskpilotError`)."""

from deskpilot._errors import *  # noqa: F403
from deskpilot._errors import __all__ as __all__
