"""``deskpilot run``: run the agent on a task or a scenario.

    deskpilot run 2                         scenario 2 of the active tool set (seeds' `python main.py 2`)
    deskpilot run seed001:3                 scenario 3 of seed 001's list (also pointer:3)
    deskpilot run "Open the calculator"     a free-form task
    deskpilot run --mode single --toolset extended --endpoint http://host:8080/v1/chat/completions ...
    deskpilot run --policy-mode confirm 3   ask on the terminal instead of refusing (see "safety" below)

Every setting also comes from the environment (LMSTUDIO_*, AGENT_*), a TOML file
(--config, default ./deskpilot.toml) and ``--set section.key=value``; flags win.
Modes add their own flags (``deskpilot run --mode team --help`` lists them).

This module also holds the option helpers ``demo`` and ``doctor`` share; it imports
nothing heavy at module level so ``deskpilot --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = [
    "add_agent_options",
    "add_model_options",
    "add_safety_options",
    "add_xwayland_option",
    "config_from_args",
    "register",
]

# 4-6: the run ended without the model finishing on purpose (README "Model servers").
_EXIT_CODES = {"answered": 0, "error": 1, "max_steps": 3, "max_time": 3, "truncated": 4, "no_action": 5,
               "server_error": 6, "failed": 7, "interrupted": 130}


def add_model_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model server")
    g.add_argument("--endpoint", help="chat completions URL (LMSTUDIO_ENDPOINT)")
    g.add_argument("--model", help="model id (LMSTUDIO_MODEL)")
    g.add_argument("--api-key", dest="api_key", help="bearer token (LMSTUDIO_API_KEY / OPENAI_API_KEY)")
    g.add_argument("--timeout", type=float, help="seconds per request: one deadline for headers and the whole body (LMSTUDIO_TIMEOUT)")
    g.add_argument("--server", choices=("auto", "lmstudio", "llamacpp", "ollama", "vllm", "openai"),
                   help="server profile: token-limit field, temperature, image limit (LMSTUDIO_SERVER; default auto)")
    g.add_argument("--config", metavar="PATH", help="TOML config file (default ./deskpilot.toml if present)")
    g.add_argument(
        "--set", dest="set_values", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="any setting, e.g. --set history.keep_last_screenshots=3 (repeatable)",
    )


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("agent")
    g.add_argument("--mode", help="single (default); team and stateless when installed (AGENT_MODE)")
    g.add_argument("--toolset", choices=("element", "pointer", "extended", "qwen", "uitars", "uitars-1.0",
                                         "auto", "seed000", "seed001"), metavar="NAME",
                   help="tool set: element (default; click_element by box, alias seed000), pointer (move_mouse + "
                   "click_mouse, alias seed001), extended, qwen / uitars / uitars-1.0 (the models' own formats), "
                   "auto (chosen from the model id: UI-TARS -> uitars / uitars-1.0, Qwen3-VL / Qwen2.5-VL -> qwen, "
                   "otherwise element) (AGENT_TOOLSET)")
    g.add_argument("--temperature", type=float, help="sampling temperature (LMSTUDIO_TEMPERATURE)")
    g.add_argument("--max-tokens", dest="max_tokens", type=int, help="completion token limit (LMSTUDIO_MAX_TOKENS)")
    g.add_argument("--max-steps", dest="max_steps", type=int, help="model requests per run (AGENT_MAX_STEPS)")
    g.add_argument("--max-seconds", dest="max_seconds", type=float, help="wall-time limit; unset = the safety hard cap only (AGENT_MAX_SECONDS)")
    g.add_argument("--stream", dest="stream", action="store_true", default=None, help="SSE streaming (LMSTUDIO_STREAM)")
    g.add_argument("--no-stream", dest="stream", action="store_false", help="one JSON answer per request")
    g.add_argument("--settle", choices=("adaptive", "fixed", "none"), help="wait for the screen: adaptive (default) or the seeds' fixed delays")
    g.add_argument("--step-delay", dest="step_delay", type=float, help="fixed sleep after each step (AGENT_STEP_DELAY)")
    g.add_argument("--image-size", dest="image_size", metavar="WxH", help="model image size, e.g. 1536x864 (AGENT_IMAGE_W/H)")
    g.add_argument("--monitor", type=int, help="1-based monitor (AGENT_MONITOR)")
    g.add_argument("--dry-run", dest="dry_run", action="store_true", default=None, help="record input actions instead of sending them")
    g.add_argument("--input", dest="input_backend", choices=("auto", "sendinput", "xtest", "wlroots", "mutter", "dry"), help="input backend")
    g.add_argument("--capture", dest="capture_backend", choices=("auto", "mss", "gdi", "wlroots", "mutter", "portal"), help="capture backend")
    add_xwayland_option(g)
    g.add_argument("--no-auto-observe", dest="observe_after_action", action="store_false", default=None,
                   help="seed behaviour: no screenshot after actions until the model asks for one")
    g.add_argument("--many-calls", dest="one_tool_call", action="store_false", default=None,
                   help="run every tool call of a reply (default: one per step, extras refused)")
    g.add_argument("--runs-dir", dest="runs_dir", help="where run directories go (AGENT_RUNS_DIR, default ./runs)")
    g.add_argument("--quiet", action="store_true", default=None, help="no live terminal output")
    g.add_argument("--json", dest="json_summary", action="store_true", help="print summary.json to stdout at the end")
    add_safety_options(parser)


def add_xwayland_option(group: Any) -> None:
    """``--allow-xwayland`` (run, panel, demo, shot, doctor): go on where the X display is
    Xwayland, whose captures show X11 windows only (:func:`deskpilot.capture.check_screen_visible`)."""
    group.add_argument(
        "--allow-xwayland", dest="allow_xwayland", action="store_true",
        help="go on when the X display is Xwayland (a Wayland session), where capture sees only X11 windows "
        "and black elsewhere; by default deskpilot refuses instead of showing a model black screenshots "
        "(DESKPILOT_ALLOW_XWAYLAND=1)",
    )


def add_safety_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "safety",
        "On by default: every action is checked against [policy] (win+r, alt+f4, ctrl+alt+delete ... and "
        "typing secrets are refused; the model gets a policy_denied tool error), the run stops on the kill "
        "switch (ctrl+alt+q, or the pointer pushed into a screen corner) and on its step/time limits, and "
        "secrets are redacted from the run directory. Configure in [policy]/[safety] of the TOML file.",
    )
    g.add_argument("--no-safety", dest="safety_enabled", action="store_false", default=None,
                   help="turn the whole safety layer off: no policy, kill switch or redaction (safety.enabled=false)")
    g.add_argument("--policy-mode", dest="policy_mode", choices=("enforce", "confirm", "audit", "off"),
                   help="enforce (default): refuse denied actions; confirm: ask on the terminal; audit: log only; "
                   "off: no checks (AGENT_POLICY)")
    g.add_argument("--no-kill-switch", dest="kill_switch", action="store_false", default=None,
                   help="do not watch the kill-switch hotkey and the fail-safe corner (AGENT_KILL_SWITCH)")
    g.add_argument("--mask-typed-text", dest="mask_typed_text", action="store_true", default=None,
                   help="replace typed text in the run records (AGENT_MASK_TYPED_TEXT)")


_FLAG_KEYS = {
    "endpoint": "model.endpoint",
    "model": "model.model",
    "api_key": "model.api_key",
    "server": "model.server",
    "timeout": "model.timeout",
    "temperature": "model.temperature",
    "max_tokens": "model.max_tokens",
    "stream": "model.stream",
    "mode": "agent.mode",
    "toolset": "agent.toolset",
    "max_steps": "agent.max_steps",
    "max_seconds": "agent.max_seconds",
    "settle": "agent.settle",
    "step_delay": "agent.step_delay",
    "dry_run": "agent.dry_run",
    "observe_after_action": "agent.observe_after_action",
    "one_tool_call": "agent.one_tool_call",
    "monitor": "screen.monitor",
    "input_backend": "screen.input_backend",
    "capture_backend": "screen.capture_backend",
    "runs_dir": "run.runs_dir",
    "quiet": "run.quiet",
    "safety_enabled": "safety.enabled",
    "policy_mode": "policy.mode",
    "kill_switch": "safety.kill_switch",
    "mask_typed_text": "safety.mask_typed_text",
}


def config_from_args(args: argparse.Namespace, extra_flags: dict[str, Any] | None = None) -> Any:
    """The AgentConfig for parsed CLI arguments (flags > env > file > defaults)."""
    from deskpilot._errors import ConfigError
    from deskpilot.agent import load_config, parse_set_option
    from deskpilot.agent.modes import discover_modes

    discover_modes()  # modes register their config sections
    flags: dict[str, Any] = {}
    for text in getattr(args, "set_values", None) or []:
        key, raw = parse_set_option(text)
        flags[key] = raw
    for attr, key in _FLAG_KEYS.items():
        value = getattr(args, attr, None)
        if value is not None:
            flags[key] = value
    size = getattr(args, "image_size", None)
    if size:
        w, sep, h = size.lower().partition("x")
        if not sep or not w.strip().isdigit() or not h.strip().isdigit():
            raise ConfigError(f"--image-size expects WxH like 1536x864, got {size!r}", where="--image-size")
        flags["screen.image_width"], flags["screen.image_height"] = int(w), int(h)
    flags.update({k: v for k, v in (extra_flags or {}).items() if v is not None})
    return load_config(flags=flags, path=getattr(args, "config", None))


class _RunParser(argparse.ArgumentParser):
    """Adds the discovered modes' own flags when ``run`` is actually parsed (not for --help of
    the top-level command, which must stay import-light)."""

    _modes_added = False

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        if not self._modes_added:
            self._modes_added = True
            try:
                from deskpilot.agent.modes import discover_modes

                for spec in discover_modes().values():
                    if spec.add_arguments is not None:
                        spec.add_arguments(self.add_argument_group(f"{spec.name} mode"))  # type: ignore[arg-type]
            except Exception as exc:
                from deskpilot._extras import missing_extra_message

                if isinstance(exc, ImportError) and missing_extra_message(exc) is not None:
                    raise  # no mode runs without the agent extra: main() says to install it
                print(f"deskpilot: warning: mode options unavailable: {exc}", file=sys.stderr)
        return super().parse_known_args(args, namespace)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the agent on a task or a scenario",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Scenarios: `deskpilot scenarios`. Exit codes: 0 answered, 1 error, 3 step/time limit, 130 interrupted.",
    )
    parser.__class__ = _RunParser
    parser.add_argument("task", nargs="*", help="scenario number (N or seed001:N), scenario name, or task text")
    parser.add_argument("--scenario", help="scenario number or name (same as the positional form)")
    parser.add_argument("--scenarios", dest="scenario_files", action="append", default=[], metavar="FILE",
                        help="TOML file with [[scenario]] tables (repeatable; also DESKPILOT_SCENARIOS)")
    add_model_options(parser)
    add_agent_options(parser)
    parser.set_defaults(handler=handle)


def _mode_flags(args: argparse.Namespace) -> dict[str, Any]:
    from deskpilot.agent.modes import discover_modes

    flags: dict[str, Any] = {}
    for spec in discover_modes().values():
        if spec.flags is not None:
            flags.update({k: v for k, v in spec.flags(args).items() if v is not None})
    return flags


def handle(args: argparse.Namespace) -> int:
    from deskpilot._errors import ConfigError
    from deskpilot.agent import (
        ConsoleReporter,
        NullReporter,
        all_scenarios,
        resolve_scenario,
        run_agent,
    )
    from deskpilot.capture import check_screen_visible
    from deskpilot.rundir import dumps_json

    config = config_from_args(args, _mode_flags(args))
    # Before the task is asked for: on a desktop capture cannot see, nothing starts.
    check_screen_visible(allow_xwayland=args.allow_xwayland, capture=config.screen.capture_backend)
    ref = args.scenario or " ".join(args.task).strip()
    if not ref:
        if not sys.stdin.isatty():
            raise ConfigError("no task: give a scenario number, a scenario name or a task text (see `deskpilot scenarios`)")
        from deskpilot.agent import ask_for_task

        # Seed 003 asks for the task when none is given; Ctrl+D or an empty line is a clear error.
        ref = ask_for_task(prompt="Task for the agent: ")
    scenarios = all_scenarios(files=args.scenario_files, config_data=config.file_data)
    scenario = resolve_scenario(ref, scenarios, toolset=config.agent.toolset)
    overrides: dict[str, Any] = {}
    explicit = {k for k, v in config.sources.items() if v != "default"}
    if scenario.toolset and "agent.toolset" not in explicit:
        overrides["agent.toolset"] = scenario.toolset
    if scenario.mode and "agent.mode" not in explicit:
        overrides["agent.mode"] = scenario.mode
    if overrides:
        config = config_from_args(args, {**_mode_flags(args), **overrides})
    quiet = config.run.quiet or args.json_summary
    reporter = NullReporter() if quiet else ConsoleReporter()
    result = run_agent(config, scenario, reporter=reporter, allow_xwayland=args.allow_xwayland)
    if args.json_summary:
        sys.stdout.write(dumps_json(result.summary, indent=True).decode() + os.linesep)
    code = _EXIT_CODES.get(result.outcome, 1)
    if code != 0:
        # Every ending but an answer says why on stderr, whatever stdout carries (the
        # JSON summary, the live lines or nothing with --quiet): a script that only
        # sees the exit status and stderr must not be left with "exit 1" alone.
        _say_why(result.outcome, code, result.summary.get("error") or result.error, result.run_dir)
    return code


#: What an ending without an error text means, for the stderr line.
_WHY = {
    "max_steps": "reached the step limit (--max-steps)",
    "max_time": "reached the time limit (--max-seconds)",
    "truncated": "the reply was cut at the token limit: raise --max-tokens",
    "no_action": "the model's reply had nothing to act on",
    "failed": "the model reported that the task failed",
    "interrupted": "stopped",
    "server_error": "the model server failed mid-answer",
}


def _say_why(outcome: str, code: int, error: object, run_dir: object) -> None:
    from deskpilot._untrusted import terminal_text

    why = str(error) if error else _WHY.get(outcome, "see the run directory")
    with contextlib.suppress(OSError, ValueError):  # a closed stderr has nobody to tell
        sys.stderr.write(terminal_text(f"deskpilot: run ended {outcome} (exit {code}): {why}; run directory: {run_dir}", one_line=True) + "\n")
        sys.stderr.flush()
