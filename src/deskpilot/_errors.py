"""The one exception root of deskpilot and its hierarchy.

Third-party and OS errors are translated at the boundary where they happen, so
callers only ever need to catch :class:`DeskpilotError` (or one of its branches).
Every error carries a ``details`` dict with machine-readable context (the request
URL, the Win32 function and GetLastError value, the X11 call, the offending
argument) that run logs record verbatim.
"""

from __future__ import annotations

# Not ``typing.TYPE_CHECKING``: importing typing costs ~10 ms of the CLI's start-up, a
# window in which Ctrl+C would still print a traceback (type checkers read the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ActionDeniedError",
    "ArgumentError",
    "CaptureError",
    "ConfigError",
    "DeskpilotError",
    "GeometryError",
    "ImagingError",
    "InputError",
    "InvalidBoxError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelStreamError",
    "ModelTimeoutError",
    "PlatformError",
    "ReferenceKernelsWarning",
    "RunInterrupted",
    "UnknownKeyError",
]


class DeskpilotError(Exception):
    """Root of every error deskpilot raises.

    Hierarchy::

        DeskpilotError
        ├── ImagingError (ValueError)       bad array shape/dtype/region for a pixel kernel
        ├── GeometryError (ValueError)      coordinates that cannot be mapped
        │   └── InvalidBoxError             a model-supplied box the agent reports back
        ├── ArgumentError (ValueError)      a model's action arguments refused, with the
        │                                   error type the model reads (deskpilot.actions)
        ├── PlatformError (OSError)         an OS call failed (Win32/X11), with details
        │   ├── CaptureError                screen capture could not be done
        │   └── InputError                  mouse/keyboard injection failed
        │       └── UnknownKeyError (ValueError)  key name not in the vocabulary
        ├── ModelError                      talking to the vision-language model failed
        │   ├── ModelConnectionError        no server / connection refused or reset
        │   ├── ModelTimeoutError           the server did not answer in time
        │   ├── ModelHTTPError              non-2xx status after retries
        │   └── ModelResponseError          2xx but unusable body (not JSON, no choices)
        ├── ActionDeniedError               the policy layer refused an action
        ├── ConfigError (ValueError)        invalid configuration value or file
        ├── RunLogError                     a run file cannot be written (disk full,
        │                                   read-only, run directory deleted) or read
        │                                   (deskpilot.agent._runlog)
        ├── RunInterrupted                  Ctrl+C / SIGTERM / kill switch stopped a run
        └── ReferenceKernelsWarning (RuntimeWarning)  a warning, not raised: the compiled
                                            core is not installed, imaging runs on numpy
    """

    def __init__(self, message: str, /, **details: Any) -> None:
        super().__init__(message)
        self.details: dict[str, Any] = details

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self.__class__.__name__


class ImagingError(DeskpilotError, ValueError):
    """An array given to a pixel kernel has the wrong shape, dtype or region."""


class GeometryError(DeskpilotError, ValueError):
    """Coordinates or a working area that cannot be mapped."""


class InvalidBoxError(GeometryError):
    """A model-supplied point/box is unusable.

    ``kind`` is the tool-error type reported to the model: ``"missing_box"`` or
    ``"invalid_box"`` (the seeds' vocabulary).
    """

    def __init__(self, message: str, /, *, kind: str = "invalid_box", **details: Any) -> None:
        super().__init__(message, **details)
        self.kind = kind


class ArgumentError(DeskpilotError, ValueError):
    """Arguments of an action (from a tool call, a protocol line, a team message) were refused.

    ``kind`` is the ``error.type`` of the tool payload the model reads back
    (``invalid_args``, ``missing_key``, ``empty_text``...); ``message`` what it is told.
    """

    def __init__(self, kind: str, message: str, /, **details: Any) -> None:
        super().__init__(message, kind=kind, **details)
        self.kind = kind
        self.message = message


class PlatformError(DeskpilotError, OSError):
    """An operating-system call failed; ``details`` names the call and the error code."""


class CaptureError(PlatformError):
    """The screen could not be captured."""


class InputError(PlatformError):
    """Mouse or keyboard input could not be injected."""


class UnknownKeyError(InputError, ValueError):
    """A key name is not in the vocabulary; ``suggestions`` lists close matches."""

    def __init__(self, key: str, suggestions: list[str] | tuple[str, ...] = ()) -> None:
        hint = f" (did you mean {', '.join(repr(s) for s in suggestions)}?)" if suggestions else ""
        super().__init__(f"unknown key {key!r}{hint}", key=key, suggestions=list(suggestions))
        self.key = key
        self.suggestions = list(suggestions)


class ModelError(DeskpilotError):
    """Talking to the vision-language model server failed."""


class ModelConnectionError(ModelError):
    """No server answered (refused, reset, DNS)."""


class ModelTimeoutError(ModelError):
    """The server did not answer within the configured timeout."""


class ModelHTTPError(ModelError):
    """The server answered with a non-success status after all retries."""

    def __init__(self, message: str, /, *, status: int, **details: Any) -> None:
        super().__init__(message, status=status, **details)
        self.status = status


class ModelResponseError(ModelError):
    """The server answered, but the body is not a usable chat completion."""


class ModelStreamError(ModelResponseError):
    """A streamed answer reported an error event (llama.cpp's ``error:`` field, an
    ``event: error``, a chunk with ``error``) or ended before it finished (no
    ``finish_reason`` and no ``data: [DONE]``): the run ends ``server_error``."""


class ActionDeniedError(DeskpilotError):
    """The policy layer refused an action (``details['rule']`` says which rule)."""


class ConfigError(DeskpilotError, ValueError):
    """A configuration value, file or flag is invalid."""


class RunInterrupted(DeskpilotError):
    """A run was stopped by Ctrl+C, SIGTERM or the kill switch (``details['reason']``)."""


class ReferenceKernelsWarning(DeskpilotError, RuntimeWarning):
    """Issued (``warnings.warn``) once at import of :mod:`deskpilot.imaging` when the compiled
    core is not installed and the numpy reference kernels run instead.

    A member of the one tree so that ``-W error`` turns it into an exception callers can catch
    as :class:`DeskpilotError`; ``details['missing']`` names the modules that did not import.
    """
