"""Safety between the model and the hands: policy, kill switch, run budget, redaction.

- :class:`Policy` decides every action (key combos, typed text, the foreground window)
  and answers with a :class:`Decision`; :func:`policy_denied_payload` turns a denial into
  the tool error the model receives.
- :class:`KillSwitch` stops a run on the fail-safe corner, a global hotkey, the wall
  clock or a programmatic trip; :class:`RunBudget` bounds steps and seconds.
- :func:`active_window` / :func:`open_window_reader` read the foreground window
  (X11 EWMH or focus, Win32 GetForegroundWindow).
- :func:`redact` / :func:`redact_text` clean run records of secrets and images, and
  mask typed text on request.
"""

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
from deskpilot.safety._confirm import NoTerminalError, terminal_prompt
from deskpilot.safety._guard import PolicyDenied, SafetyGuard, action_request, run_guarded
from deskpilot.safety._killswitch import (
    BudgetExhausted,
    KillSwitch,
    RunBudget,
    Trip,
    WatchBackend,
    Win32WatchBackend,
    X11WatchBackend,
)
from deskpilot.safety._policy import ActionRequest, Decision, Policy, policy_denied_payload
from deskpilot.safety._policy import ConfirmPrompt as ConfirmPrompt
from deskpilot.safety._redact import RedactOptions, mask_text, redact, redact_lines, redact_text
from deskpilot.safety._redact import TypedTexts as TypedTexts
from deskpilot.safety._redact import typing_tool_names as typing_tool_names
from deskpilot.safety._secrets import DETECTOR_NAMES, SecretMatch, find_secrets, luhn_valid
from deskpilot.safety._settings import SETTINGS_SECTIONS, PolicySettings, SafetySettings
from deskpilot.safety._window import (
    Win32WindowReader,
    WindowInfo,
    WindowReader,
    X11WindowReader,
    open_window_reader,
)

__all__ = [
    "DETECTOR_NAMES",
    "SETTINGS_SECTIONS",
    "ActionRequest",
    "BudgetExhausted",
    "Decision",
    "KillSwitch",
    "NoTerminalError",
    "Policy",
    "PolicyDenied",
    "PolicySettings",
    "RedactOptions",
    "RunBudget",
    "SafetyGuard",
    "SafetySettings",
    "SecretMatch",
    "Trip",
    "WatchBackend",
    "Win32WatchBackend",
    "Win32WindowReader",
    "WindowInfo",
    "WindowReader",
    "X11WatchBackend",
    "X11WindowReader",
    "action_request",
    "find_secrets",
    "luhn_valid",
    "mask_text",
    "open_window_reader",
    "policy_denied_payload",
    "redact",
    "redact_lines",
    "redact_text",
    "run_guarded",
    "terminal_prompt",
]
