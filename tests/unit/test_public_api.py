"""The public surface, name by name (as httpx's ``test_exported_members`` does).

Every public package and module lists what it exports in a sorted ``__all__``; this file
holds the same lists literally, so that adding, dropping or renaming a public name shows
up as a change to a test a reviewer reads, never as an accident. A new public package or
top-level module fails :func:`test_every_public_module_is_guarded` until it is listed here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import types

import pytest

import deskpilot
from deskpilot import errors

EXPECTED_ALL: dict[str, list[str]] = {
    "deskpilot": [
        "Capturer",
        "DeskpilotError",
        "Frame",
        "InputController",
        "__version__",
    ],
    "deskpilot.actions": [
        "PASSIVE",
        "Action",
        "ActionRecord",
        "ArgumentError",
        "Click",
        "Drag",
        "Hold",
        "KeyPress",
        "MoveMouse",
        "Point",
        "RecordStyle",
        "Scroll",
        "TypeText",
        "Wait",
        "Zoom",
        "box",
        "combo_names",
        "coordinate",
        "from_record",
        "integer",
        "key_combo",
        "label",
        "number",
        "text",
    ],
    "deskpilot.agent": [
        "AgentConfig",
        "ChatClient",
        "Completion",
        "History",
        "ModeResult",
        "ModeSpec",
        "Observation",
        "Performed",
        "RunLog",
        "RunResult",
        "Scenario",
        "Screen",
        "Session",
        "Shot",
        "Tool",
        "ToolContext",
        "ToolOutcome",
        "ToolSet",
        "Turn",
        "act",
        "err_payload",
        "iter_turns",
        "load_config",
        "load_summary",
        "make_toolset",
        "ok_payload",
        "register_section",
        "run_agent",
        "run_agent_async",
        "setting",
        "toolset",
        "validate_run_dir",
    ],
    "deskpilot.agent.modes.stateless": [
        "ACTION_NAMES",
        "MODE",
        "BBox",
        "Rejection",
        "ReplyAction",
        "StatelessError",
        "StatelessMode",
        "StatelessSettings",
        "VlmOutput",
        "add_arguments",
        "flags",
        "parse_vlm_output",
        "run_stateless",
        "take_lingering_panels",
    ],
    "deskpilot.agent.modes.team": [
        "COMMANDER_OPERATOR",
        "MODE",
        "PLANNER_EXECUTOR",
        "VARIANTS",
        "AgentMemory",
        "ArchiveArgs",
        "CompletionArgs",
        "Coordinate",
        "DragArgs",
        "ExecutionLog",
        "KeyArgs",
        "LoopDetector",
        "MemoryEntry",
        "ParsedCall",
        "PlanArgs",
        "PointerArgs",
        "ProgressArgs",
        "ScrollArgs",
        "TeamMode",
        "TeamParams",
        "TeamSettings",
        "TeamState",
        "TeamVariant",
        "TextArgs",
        "action_signature",
        "ask_for_task",
        "parse_call",
        "recovery_actions",
        "resolve_params",
        "resolve_variant",
        "run_recovery",
    ],
    "deskpilot.agent.client": [
        "ChatClient",
        "Completion",
        "History",
        "ServerProfile",
        "ToolCall",
        "detect_profile",
        "extract_think",
        "png_data_url",
        "strip_think",
    ],
    "deskpilot.agent.modes": [
        "Mode",
        "ModeSpec",
        "discover_modes",
        "get_mode",
        "register_mode",
    ],
    "deskpilot.agent.tools": [
        "Performed",
        "Tool",
        "ToolContext",
        "ToolOutcome",
        "ToolSet",
        "act",
        "err_payload",
        "execute_tool_call",
        "make_toolset",
        "ok_payload",
        "toolset",
    ],
    "deskpilot.rundir": [
        "EXCHANGE_FILE",
        "EXECUTION_LOG_FILE",
        "FORMAT_VERSION",
        "RUN_FILE",
        "STATELESS_FILE",
        "SUMMARY_FILE",
        "TURNS_FILE",
        "ActionRecord",
        "ExchangeLog",
        "LineFile",
        "MappingRecord",
        "ModelRecord",
        "ObservationRecord",
        "RecordedAnswer",
        "Recording",
        "RunInfo",
        "RunLog",
        "Summary",
        "TurnRecord",
        "decode_png",
        "iter_turns",
        "load_recording",
        "load_summary",
        "validate_run_dir",
    ],
    "deskpilot.capture": [
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
    ],
    "deskpilot.cli": [
        "main",
    ],
    "deskpilot.commands": [],
    "deskpilot.eval": [
        "SUITES",
        "Attempt",
        "AttemptQueue",
        "Engine",
        "EvalOutcome",
        "LocalEngine",
        "RayEngine",
        "Step",
        "Suite",
        "Task",
        "load_suite",
        "merge_results",
        "run_eval",
        "run_session",
    ],
    "deskpilot.errors": [
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
    ],
    "deskpilot.geometry": [
        "NORM_MAX",
        "Box",
        "Mapping",
        "Rect",
        "clamp_norm",
        "crop_rect",
        "parse_box",
    ],
    "deskpilot.imaging": [
        "BACKEND",
        "DEFLATE_ENGINE",
        "OVERLAY_BACKEND",
        "PNG_FILTERS",
        "ActionMark",
        "Annotator",
        "BoxMark",
        "CursorKind",
        "OverlayStyle",
        "PngFilter",
        "Region",
        "annotate",
        "bgra_to_rgb",
        "changed_region",
        "composite_cursor",
        "crop",
        "downscale",
        "encode_png",
        "frame_digest",
        "prepare",
    ],
    "deskpilot.input": [
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
    ],
    "deskpilot.mcp": [
        "DEFAULT_MAX_BYTES",
        "DEFAULT_MAX_IMAGE",
        "TOOL_NAMES",
        "Desktop",
        "DesktopOptions",
        "ServeOptions",
        "build_server",
        "serve",
    ],
    "deskpilot.panel": [
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
    ],
    "deskpilot.replay": [
        "Divergence",
        "FrameTolerance",
        "RecordedScreen",
        "Recording",
        "RecordingError",
        "ReplayError",
        "ReplayOptions",
        "ReplayResult",
        "ScreenCheck",
        "compare_frames",
        "format_result",
        "load_recording",
        "replay_run",
    ],
    "deskpilot.report": [
        "ReportData",
        "build_report_data",
        "render_report",
        "write_report",
    ],
    "deskpilot.safety": [
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
    ],
    "deskpilot.testing": [
        "AutoPolicy",
        "Fault",
        "ImageInfo",
        "ModelServer",
        "PixelPolicy",
        "RecordedRequest",
        "Reply",
        "ReplyPolicy",
        "ScriptedPolicy",
        "StatelessPolicy",
        "TeamPolicy",
        "find_color",
        "reply_from_json",
        "serve",
        "tool_call",
        "validate_chat_request",
    ],
}

#: Names that look public in a guarded module without being in its ``__all__``, and why
#: they are there all the same. Anything else that looks public is an accident.
ALLOWED_EXTRAS: dict[str, set[str]] = {
    # The geometry its actions are made of and the errors its checkers raise.
    "deskpilot.actions": {"Box", "InvalidBoxError", "UnknownKeyError", "clamp_norm", "parse_box"},
    # The errors its functions raise; importable from here before they had deskpilot.errors.
    "deskpilot.geometry": {"GeometryError", "InvalidBoxError"},
    # MODE is built from it when the package is imported.
    "deskpilot.agent.modes.stateless": {"ModeSpec"},
    # What render_report and write_report are made of.
    "deskpilot.report": {"REPORT_FILE", "load_recording", "render_html"},
    # The CLI's parts: what main() catches, and the parser the server-corpus test builds.
    "deskpilot.cli": {"COMMANDS", "DeskpilotError", "NAMES_HELP", "RunInterrupted", "build_parser"},
}

#: Each room's internal interface (ARCHITECTURE.md, "Faces"): names its ``__init__``
#: re-exports for the other rooms of deskpilot (a room never imports another room's private
#: module: tests/unit/test_architecture.py), not for users, so not in ``__all__``.
INTERNAL_INTERFACE: dict[str, set[str]] = {
    "deskpilot.agent": {
        "BUILTIN_SCENARIOS", "DEMO_TEXT", "CapturerScreen", "ConsoleReporter", "NullReporter", "Probe", "Reporter",
        "ThreadBound", "all_scenarios", "ask_for_task", "build_guard", "change_box", "drives_desktop",
        "expand_rect", "open_damage", "parse_set_option", "reads_x11_windows", "registered_sections",
        "resolve_limits", "resolve_scenario", "run_info", "summarize",
    },
    "deskpilot.agent.tools": {"key_names"},
    "deskpilot.capture": {"DamageBackend", "DamageSource", "PointerBackend", "auto_backend"},
    "deskpilot.eval": {"Progress", "check_platform", "parse_shard"},
    "deskpilot.imaging": {"GradientStops", "Rgba", "action_mark", "env_flag", "reference_kernels_message", "scroll_words"},
    "deskpilot.input": {"SHIFTED_KEYS", "resolve_key"},
    "deskpilot.panel": {"AccessGuard"},
    "deskpilot.rundir": {
        "CallRecord", "ModelTimingsRecord", "ReplyRecord", "SettleRecord", "TeamTurnRecord", "ToolCallRecord",
        "dumps_json", "image_digest_of_url",
    },
    "deskpilot.safety": {"ConfirmPrompt", "TypedTexts", "typing_tool_names"},
    # Loaded on first use (the demo needs the agent, Chromium's driver fcntl).
    "deskpilot.testing": {
        "EXAMPLES", "Chromium", "DemoResult", "example_items", "example_path", "find_chromium", "run_demo",
        "virtual_display", "xvfb",
    },
}

#: Exceptions exported outside deskpilot.errors on purpose (none: a run's ending, the step
#: limit included, is an outcome value, not an exception).
NOT_IN_ERROR_TREE: set[str] = set()

#: The module that defined each exception before it moved into deskpilot._errors (under
#: the module's current path, where the rooms moved it); those imports keep working.
OLD_HOMES = [
    ("deskpilot.agent.modes.stateless._engine", "StatelessError"),
    ("deskpilot.rundir._writer", "RunLogError"),
    ("deskpilot.safety._policy", "NoTerminalError"),
    ("deskpilot.safety._policy", "ConfirmationAborted"),
    ("deskpilot.safety._confirm", "NoTerminalError"),
    ("deskpilot.safety._confirm", "ConfirmationAborted"),
    ("deskpilot.safety._guard", "PolicyDenied"),
    ("deskpilot.input._controller", "InputArgumentError"),
    ("deskpilot.replay._runner", "ReplayError"),
    ("deskpilot.rundir._reader", "RecordingError"),
    ("deskpilot.rundir._reader", "ReplayDecodeError"),
    ("deskpilot.panel._png", "InvalidPNG"),
    pytest.param(
        "deskpilot.testing._chromium", "BrowserError",
        marks=pytest.mark.skipif(sys.platform == "win32", reason="the Chromium driver uses fcntl"),
    ),
    ("deskpilot.panel._state", "AnnotationRejected"),
]


def _isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps ``__all__`` in: CONSTANTS, then Classes, then the rest."""
    if len(name) > 1 and name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def _public_modules() -> set[str]:
    """Every package of deskpilot without a private part in its name, and the public
    modules at the top level (a public module inside a package is that package's business)."""
    found = {"deskpilot"}
    for info in pkgutil.walk_packages(deskpilot.__path__, "deskpilot."):
        parts = info.name.split(".")[1:]
        if any(part.startswith("_") for part in parts):
            continue
        if info.ispkg or len(parts) == 1:
            found.add(info.name)
    return found


def test_every_public_module_is_guarded() -> None:
    assert _public_modules() == set(EXPECTED_ALL)


@pytest.mark.parametrize("name", sorted(EXPECTED_ALL))
def test_exported_members(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key), "__all__ is sorted"
    assert len(set(exported)) == len(exported), "__all__ has no duplicates"
    for member in exported:
        getattr(module, member)  # resolves (lazy attributes included)
    assert exported == EXPECTED_ALL[name]


@pytest.mark.parametrize("name", sorted(EXPECTED_ALL))
def test_no_accidental_public_names(name: str) -> None:
    """A name without a leading underscore that the module defines or re-exports from
    deskpilot (a class, a function, an UPPER_CASE constant) is public by accident unless
    ``__all__`` or :data:`ALLOWED_EXTRAS` lists it. Imported modules and typing helpers
    do not count."""
    module = importlib.import_module(name)
    extras = set()
    for member, value in vars(module).items():
        if member.startswith("_") or member in module.__all__ or member == "TYPE_CHECKING":
            continue
        if isinstance(value, types.ModuleType):
            continue
        defined_here = str(getattr(value, "__module__", "")).startswith("deskpilot")
        if defined_here or member.isupper():
            extras.add(member)
    assert extras - INTERNAL_INTERFACE.get(name, set()) == ALLOWED_EXTRAS.get(name, set())


@pytest.mark.parametrize("name", sorted(INTERNAL_INTERFACE))
def test_the_internal_interface_resolves_outside_all(name: str) -> None:
    """Each name of a room's internal interface is there (lazy ones included) and kept out of
    the users' ``__all__``."""
    module = importlib.import_module(name)
    for member in sorted(INTERNAL_INTERFACE[name]):
        if name == "deskpilot.testing" and member in {"Chromium", "find_chromium"} and sys.platform == "win32":
            continue  # the Chromium driver uses fcntl
        getattr(module, member)
        assert member not in module.__all__, f"{name}.{member} is for other rooms, not users"


def test_error_tree_is_one_module() -> None:
    """Every exception a public package exports is the one deskpilot.errors exports."""
    for name in EXPECTED_ALL:
        module = importlib.import_module(name)
        for member in module.__all__:
            value = getattr(module, member)
            if not (isinstance(value, type) and issubclass(value, BaseException)):
                continue
            if member in NOT_IN_ERROR_TREE:
                continue
            assert getattr(errors, member, None) is value, f"{name}.{member}"
            assert value.__module__ == "deskpilot._errors", f"{name}.{member}"


def test_every_error_derives_from_the_root_and_is_drawn_in_the_tree() -> None:
    tree = errors.DeskpilotError.__doc__ or ""
    for member in errors.__all__:
        value = getattr(errors, member)
        assert issubclass(value, errors.DeskpilotError)
        assert value.__module__ == "deskpilot._errors"
        assert re.search(rf"[─\s]{member}\b", tree), f"{member} missing from the tree"


@pytest.mark.parametrize(("module", "member"), OLD_HOMES)
def test_moved_errors_keep_their_old_imports(module: str, member: str) -> None:
    assert getattr(importlib.import_module(module), member) is getattr(errors, member)


def test_moved_errors_keep_their_details() -> None:
    tool = errors.ArgumentError("invalid_args", "x must be 0..1000")
    assert (tool.kind, tool.message, tool.details) == ("invalid_args", "x must be 0..1000", {"kind": "invalid_args"})
    rejected = errors.AnnotationRejected("stale seq", status=409, seq=3)
    assert rejected.status == 409
    assert rejected.details == {"status": 409, "seq": 3}
    assert isinstance(errors.InvalidPNG("truncated"), ValueError)
    assert isinstance(errors.InputArgumentError("bad button"), (errors.InputError, ValueError))
    assert issubclass(errors.ConfirmationAborted, errors.NoTerminalError)
    assert issubclass(errors.PolicyDenied, errors.ActionDeniedError)
