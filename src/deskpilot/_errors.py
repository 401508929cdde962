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

    from deskpilot.safety import Decision

__all__ = [
    "ActionDeniedError",
    "AnnotationRejected",
    "ArgumentError",
    "BrowserError",
    "CaptureError",
    "ConfigError",
    "ConfirmationAborted",
    "DeskpilotError",
    "GeometryError",
    "ImagingError",
    "InputArgumentError",
    "InputError",
    "InvalidBoxError",
    "InvalidPNG",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelStreamError",
    "ModelTimeoutError",
    "NoTerminalError",
    "PlatformError",
    "PolicyDenied",
    "RecordingError",
    "ReferenceKernelsWarning",
    "ReplayDecodeError",
    "ReplayError",
    "RunInterrupted",
    "RunLogError",
    "ScreenNotVisibleError",
    "StatelessError",
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
        │                                   error type the model reads (deskpilot.actions);
        │                                   becomes an ``{ok: false}`` payload, never a
        │                                   crash
        ├── PlatformError (OSError)         an OS call failed (Win32/X11), with details
        │   ├── CaptureError                screen capture could not be done
        │   │   └── ScreenNotVisibleError   capture would be blind: the X display is
        │   │                               Xwayland (a Wayland session)
        │   └── InputError                  mouse/keyboard injection failed
        │       ├── InputArgumentError (ArgumentError)  bad button, count, coordinate or text
        │       └── UnknownKeyError (ValueError)     key name not in the vocabulary
        ├── ModelError                      talking to the vision-language model failed
        │   ├── ModelConnectionError        no server / connection refused or reset
        │   ├── ModelTimeoutError           the server did not answer in time
        │   ├── ModelHTTPError              non-2xx status after retries
        │   └── ModelResponseError          2xx but unusable body (not JSON, no choices)
        │       └── ModelStreamError        a streamed answer reported an error or broke off
        ├── ActionDeniedError               the policy layer refused an action
        │   ├── PolicyDenied                the denial with its Decision and the model's payload
        │   └── NoTerminalError             confirmation needed, no terminal to ask on
        │       └── ConfirmationAborted     the question was withdrawn (the run is stopping)
        ├── ConfigError (ValueError)        invalid configuration value or file
        ├── RunLogError                     a run file cannot be written (disk full,
        │                                   read-only, run directory deleted) or read
        ├── StatelessError                  the stateless loop cannot go on
        ├── RecordingError                  a path is not a run directory (replay, report)
        ├── ReplayError                     a recorded run cannot be replayed
        ├── ReplayDecodeError               a recorded screenshot cannot be decoded
        ├── InvalidPNG (ValueError)         bytes that are not a well-formed PNG (panel)
        ├── AnnotationRejected              the panel refused ``POST /annotated`` (409, 422)
        ├── BrowserError                    Chromium missing, silent, or a page raised
        ├── RunInterrupted                  Ctrl+C / SIGTERM / kill switch stopped a run
        └── ReferenceKernelsWarning (RuntimeWarning)  a warning, not raised: the compiled
                                            core is not installed, imaging runs on numpy

    Every class is defined here and importable from :mod:`deskpilot.errors`; the modules
    that raise them re-export them under their old names. Exceptions a single module uses
    for its own control flow (``_Retryable``, ``_Reject``, ``_BadRequest``, ``_HTTPError``,
    ``_SetupInterrupted``) are private to that module and never reach a caller.
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


class ScreenNotVisibleError(CaptureError):
    """A capture of the desktop would not show what is on the screen: the X display is
    Xwayland (a Wayland session), which sees X11 windows only and black elsewhere.

    Raised by :func:`deskpilot.capture.check_screen_visible` before anything starts, so
    that no model is ever shown a black screenshot; the message says what to do.
    ``details``: ``display``, ``server``, ``outputs`` (the RandR output names), ``hints``.
    """


class InputError(PlatformError):
    """Mouse or keyboard input could not be injected."""


class InputArgumentError(InputError, ArgumentError):
    """An argument of an input action is invalid (button, count, coordinate, text).

    An :class:`ArgumentError` (``kind`` ``invalid_args``) like every refused argument;
    also an :class:`InputError`, since the input layer refused it: a tool that hit it
    reports ``action_failed``.
    """

    def __init__(self, message: str, /, **details: Any) -> None:
        ArgumentError.__init__(self, "invalid_args", message, **details)


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

    #: The tool payload the model reads (None: worded from the message by whoever reports it).
    payload: dict[str, Any] | None = None


class PolicyDenied(ActionDeniedError):
    """A policy denial carrying its :class:`~deskpilot.safety.Decision` and the tool payload for the model.

    The guard words the payload (the safety policy's wording) and hands it in: this module
    is the floor every other one stands on and imports nothing of deskpilot.
    """

    def __init__(self, decision: Decision, payload: dict[str, Any]) -> None:
        super().__init__(decision.reason, rule=decision.rule, category=decision.category)
        self.decision = decision
        self.payload = payload


class NoTerminalError(ActionDeniedError):
    """Confirmation was needed but there is no terminal to ask on."""


class ConfirmationAborted(NoTerminalError):
    """The question was withdrawn before an answer (the run is stopping)."""


class ConfigError(DeskpilotError, ValueError):
    """A configuration value, file or flag is invalid."""


class RunLogError(DeskpilotError):
    """The run directory cannot be written, or a recorded one is not valid."""


class StatelessError(DeskpilotError):
    """The stateless loop cannot go on (no injected output in time, no working area)."""


class RecordingError(DeskpilotError):
    """The path is not a run directory (nothing recorded there)."""


class ReplayError(DeskpilotError):
    """The run cannot be replayed (no configuration recorded, nothing to replay)."""


class ReplayDecodeError(DeskpilotError):
    """A recorded screenshot cannot be decoded (or Pillow is not installed)."""


class InvalidPNG(DeskpilotError, ValueError):
    """Bytes that are not a complete, well-formed PNG (the message says what is wrong)."""


class AnnotationRejected(DeskpilotError):
    """``POST /annotated`` refused: ``status`` 409 (wrong or stale seq) or 422 (bad image)."""

    def __init__(self, message: str, /, *, status: int, **details: Any) -> None:
        super().__init__(message, status=status, **details)
        self.status = status


class BrowserError(DeskpilotError):
    """Chromium is missing, did not answer, or a page raised."""


class RunInterrupted(DeskpilotError):
    """A run was stopped by Ctrl+C, SIGTERM or the kill switch (``details['reason']``)."""


class ReferenceKernelsWarning(DeskpilotError, RuntimeWarning):
    """Issued (``warnings.warn``) once at import of :mod:`deskpilot.imaging` when the compiled
    core is not installed and the numpy reference kernels run instead.

    A member of the one tree so that ``-W error`` turns it into an exception callers can catch
    as :class:`DeskpilotError`; ``details['missing']`` names the modules that did not import.
    """
