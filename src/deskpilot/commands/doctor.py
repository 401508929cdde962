"""``deskpilot doctor``: check the display, whether capture can see the screen (not on
Xwayland), DPI awareness, the imaging core (compiled or numpy reference), capture, input,
the model server
and whether the model accepts images and tools. One PASS/WARN/FAIL/SKIP line per check;
exit code 1 when any check fails."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

from deskpilot._untrusted import terminal_text
from deskpilot.commands.run import add_model_options, add_xwayland_option, config_from_args

__all__ = [
    "OLLAMA_DEFAULT_CTX",
    "PROBE_COLORS",
    "CheckResult",
    "image_check",
    "register",
    "request_tokens",
    "run_checks",
    "verdict",
]


@dataclass
class CheckResult:
    name: str
    status: str  # PASS | WARN | FAIL | SKIP
    detail: str


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check display, DPI awareness, capture, input, model server, images and tools",
        description=__doc__,
    )
    add_model_options(parser)
    parser.add_argument(
        "--no-model", dest="no_model", action="store_true", help="skip the model server checks"
    )
    add_xwayland_option(parser)
    parser.set_defaults(handler=handle)


def _display_check() -> tuple[CheckResult, bool]:
    if sys.platform == "win32":
        return CheckResult("display", "PASS", "Windows desktop"), True
    display = os.environ.get("DISPLAY")
    if not display:
        wayland = os.environ.get("WAYLAND_DISPLAY")
        hint = " (Wayland without XWayland's DISPLAY is not supported)" if wayland else ""
        return CheckResult(
            "display",
            "FAIL",
            f"DISPLAY is not set{hint}: run on a desktop, or `deskpilot demo` starts Xvfb",
        ), False
    return CheckResult("display", "PASS", f"DISPLAY={display}"), True


def _wlroots_chosen(config: Any) -> bool:
    """Whether the configured capture or input backend is (or ``auto`` picks) the wlroots one (sway...)."""
    chosen = (config.screen.capture_backend, config.screen.input_backend)
    if "wlroots" in chosen:
        return True
    if "auto" not in chosen or sys.platform == "win32" or not os.environ.get("WAYLAND_DISPLAY"):
        return False
    from deskpilot.capture import auto_backend

    return auto_backend("capture") == "wlroots"


def _killswitch_check(config: Any) -> CheckResult | None:
    """What stops a run on wlroots, where the kill switch cannot watch the desktop (None
    elsewhere: the X11 and Windows kill switches arm themselves and say so at run start)."""
    if not _wlroots_chosen(config):
        return None
    return CheckResult(
        "kill switch",
        "WARN",
        "wlroots: the fail-safe corner and the stop hotkey are not watched (a wlroots compositor "
        "tells a client neither where the pointer is nor a key pressed for another window); a run "
        "stops on Ctrl+C or SIGTERM, at its step and time budgets, and by a programmatic stop; a "
        "run killed with SIGKILL has its held mouse buttons released by the input watchdog and its "
        "keys by the compositor",
    )


def _screen_check(*, allow_xwayland: bool = False, capture: str = "auto") -> tuple[CheckResult, str]:
    """Whether a capture of the desktop sees the screen: PASS on X11 and on a Wayland session
    a Wayland backend sees (GNOME: Mutter; sway: wlroots; others: the portal), FAIL on
    Xwayland otherwise (X11 windows only, black elsewhere), WARN when that is allowed. With
    the Wayland capture backend that sees it ("" where the X11 or OS default does)."""
    try:
        from deskpilot.capture import check_screen_visible

        found = check_screen_visible(allow_xwayland=allow_xwayland, capture=capture)
    except Exception as exc:  # ScreenNotVisibleError says what to do; anything else, what broke
        return CheckResult("screen", "FAIL", str(exc)), ""
    return CheckResult("screen", "WARN" if found.allowed else "PASS", found.describe()), found.backend


def _portal_approval_check() -> CheckResult | None:
    """The portal capture before its first approval: a grab would open the desktop's
    screen-sharing dialog and wait for the user, so doctor says what to do instead (None
    when a restore token is kept: the grab then runs without a dialog)."""
    from deskpilot._wayland import load_restore_token, restore_token_path

    if load_restore_token() is not None:
        return None
    return CheckResult(
        "capture",
        "WARN",
        "portal backend (xdg-desktop-portal ScreenCast): not approved yet; run `deskpilot shot "
        "--capture portal` once at the desktop and choose the screens to share in its dialog; the "
        f"approval is kept in {restore_token_path()} (delete it to ask again), later runs start "
        "without a dialog",
    )


def _dpi_check() -> CheckResult:
    if sys.platform != "win32":
        return CheckResult("DPI awareness", "SKIP", "only needed on Windows")
    try:
        from deskpilot._win32.dpi import ensure_dpi_awareness

        result = ensure_dpi_awareness()
    except Exception as exc:
        return CheckResult("DPI awareness", "FAIL", f"{type(exc).__name__}: {exc}")
    return CheckResult("DPI awareness", "PASS" if result.per_monitor else "WARN", result.describe())


def _capture_check(config: Any) -> CheckResult:
    try:
        from deskpilot.agent import CapturerScreen

        size = (config.screen.image_width, config.screen.image_height)
        started = time.perf_counter()
        screen = CapturerScreen(
            size=size, monitor=config.screen.monitor, backend=config.screen.capture_backend
        )
        try:
            shot = screen.grab()
            first = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            screen.grab()
            again = (time.perf_counter() - started) * 1000
        finally:
            backend = screen.backend_name
            screen.close()
    except Exception as exc:
        return CheckResult("capture", "FAIL", f"{type(exc).__name__}: {exc}")
    m = shot.mapping.describe()
    # Which kernels did the work is the "imaging core" line's business, not this one's.
    return CheckResult(
        "capture",
        "PASS",
        f"{backend} backend; monitor {config.screen.monitor} {m['physical_size'][0]}x{m['physical_size'][1]} at {tuple(m['origin'])} -> "
        f"{m['image_size'][0]}x{m['image_size'][1]}; first grab {first:.0f} ms, next {again:.1f} ms",
    )


def _core_check() -> CheckResult:
    """Compiled core or numpy reference kernels, and how to get the compiled one."""
    try:
        from deskpilot import imaging
        from deskpilot.imaging import OVERLAY_BACKEND, env_flag, reference_kernels_message
    except ImportError as exc:  # DESKPILOT_REQUIRE_NATIVE=1 without a core, or a stale core
        return CheckResult("imaging core", "FAIL", str(exc))
    if imaging.BACKEND == "native" and OVERLAY_BACKEND == "native":
        import importlib

        native = importlib.import_module("deskpilot._native.imaging")
        rows = "AVX2 row kernels" if native.simd_enabled() else "scalar row kernels"
        return CheckResult(
            "imaging core", "PASS", f"native: compiled core {native.CORE_VERSION} ({rows})"
        )
    if env_flag("DESKPILOT_PURE"):
        return CheckResult(
            "imaging core",
            "WARN",
            "reference: numpy kernels chosen by DESKPILOT_PURE=1 (unset it for the compiled core)",
        )
    missing = (
        "deskpilot._native.imaging" if imaging.BACKEND != "native" else "deskpilot._native.annotate"
    )
    return CheckResult("imaging core", "WARN", "reference: " + reference_kernels_message(missing))


def _input_check(config: Any, capture: str = "") -> CheckResult:
    backend = "dry" if config.agent.dry_run else config.screen.input_backend
    if capture == "portal" and backend in ("auto", "mutter", "wlroots"):
        from deskpilot._wayland import PORTAL_INPUT_MISSING, wayland_backend

        if wayland_backend("input") is None:
            return CheckResult("input", "FAIL", f"{backend}: {PORTAL_INPUT_MISSING}; to drive X11 windows "
                               "only (through Xwayland), pass --input xtest")
    try:
        from deskpilot.input import InputController

        with InputController(backend) as hands:
            pos = hands.position()
            desktop = hands.desktop
            name = hands.backend.name
    except Exception as exc:
        return CheckResult("input", "FAIL", f"{type(exc).__name__}: {exc}")
    detail = f"{name} backend; desktop {desktop.width}x{desktop.height}, pointer at {pos}"
    if name == "mutter":
        # Say exactly what stops a run here: the X11 watchers cannot see Wayland input.
        detail += ("; kill switch: the fail-safe corner (the pointer sampled from Mutter's stream), Ctrl+C, "
                   "the panel's stop and the budgets; no hotkey (a Wayland session shows global keys to "
                   "no client)")
    return CheckResult("input", "PASS", detail)


#: Probe colours for the image check: one is drawn at random per run, so a model that
#: cannot see the image (and guesses, or names a colour from the prompt) rarely passes.
PROBE_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (230, 25, 25),
    "green": (20, 170, 40),
    "blue": (25, 60, 230),
    "yellow": (245, 215, 20),
}


def _probe_png(rgb: tuple[int, int, int]) -> bytes:
    import numpy as np

    from deskpilot import imaging

    img = np.zeros((64, 64, 3), np.uint8)
    img[:, :] = rgb
    return imaging.encode_png(img)


def _colors_named(answer: str) -> set[str]:
    """The probe colours an answer names (words, or ``#rrggbb`` mapped to the nearest)."""
    text = answer.lower()
    named = {c for c in PROBE_COLORS if re.search(rf"\b{c}\b", text)}
    for hex_code in re.findall(r"#([0-9a-f]{6})\b", text):
        rgb = tuple(int(hex_code[i : i + 2], 16) for i in (0, 2, 4))
        named.add(
            min(
                PROBE_COLORS,
                key=lambda c: sum((a - b) ** 2 for a, b in zip(PROBE_COLORS[c], rgb, strict=True)),
            )
        )
    return named


def image_check(expected: str, answer: str, ms: float) -> CheckResult:
    """PASS when the answer names the probe's colour (and no other), else WARN."""
    named = _colors_named(answer)
    excerpt = answer.strip().replace("\n", " ")[:80]
    if named == {expected}:
        return CheckResult(
            "images", "PASS", f"the model named the {expected} probe image correctly ({ms:.0f} ms)"
        )
    return CheckResult(
        "images",
        "WARN",
        f"model may not see images: asked for the colour of a {expected} image, it answered {excerpt!r}",
    )


def _answer_text(completion: Any) -> str:
    """The colour the model reported: report_color's argument, else its text."""
    from deskpilot.agent.client import strip_think

    for call in completion.tool_calls:
        if call.name == "report_color":
            color = (call.arguments or {}).get("color")
            return color if isinstance(color, str) else call.raw_arguments
    return strip_think(completion.content or "")


async def _model_checks(config: Any, *, probe: str | None = None) -> list[CheckResult]:
    from deskpilot.agent.client import ChatClient, History

    checks: list[CheckResult] = []
    model = config.model
    async with ChatClient(
        model.endpoint,
        model.model,
        timeout=model.timeout,
        max_retries=0,
        api_key=model.api_key or None,
    ) as client:
        try:
            started = time.perf_counter()
            ids = await client.models()
            ms = (time.perf_counter() - started) * 1000
        except Exception as exc:
            checks.append(CheckResult("endpoint", "FAIL", str(exc)))
            return checks
        checks.append(
            CheckResult(
                "endpoint",
                "PASS",
                f"{client.models_url} answered in {ms:.0f} ms: {len(ids)} model(s)",
            )
        )
        if ids and model.model not in ids:
            checks.append(
                CheckResult(
                    "model",
                    "WARN",
                    f"{model.model!r} is not listed ({', '.join(ids[:5])}); the server may load it on demand",
                )
            )
        elif ids:
            checks.append(CheckResult("model", "PASS", f"{model.model!r} is loaded"))
        checks.extend(await _server_checks(client, config))
        tool = {
            "type": "function",
            "function": {
                "name": "report_color",
                "description": "Report the main colour of the image.",
                "parameters": {
                    "type": "object",
                    "properties": {"color": {"type": "string"}},
                    "required": ["color"],
                },
            },
        }
        history = History("You are a test. Answer by calling the tool.", tools=[tool])
        color = probe or random.choice(sorted(PROBE_COLORS))
        history.add_task(
            "What colour is this image? Call report_color with the colour name (one word)."
        )
        history.add_observation(_probe_png(PROBE_COLORS[color]), text="A 64x64 image.")
        body = history.build_request(model=model.model, temperature=0.0, max_tokens=256)
        try:
            started = time.perf_counter()
            completion = await client.complete(body, context={"check": "doctor"})
            ms = (time.perf_counter() - started) * 1000
        except Exception as exc:
            checks.append(CheckResult("images + tools", "FAIL", str(exc)))
            return checks
        checks.append(image_check(color, _answer_text(completion), ms))
        if completion.tool_calls:
            call = completion.tool_calls[0]
            source = " (parsed from the text)" if call.source != "native" else ""
            checks.append(
                CheckResult(
                    "tools", "PASS", f"the model called {call.name}({call.raw_arguments}){source}"
                )
            )
        else:
            excerpt = completion.content.strip().replace("\n", " ")[:80]
            checks.append(
                CheckResult("tools", "WARN", f"the model answered without a tool call: {excerpt!r}")
            )
    return checks


#: Ollama's context when nothing sets it: 4096 tokens on GPUs with under 23 GiB (its FAQ,
#: "How can I specify the context window size?"); the oldest messages beyond it are cut.
OLLAMA_DEFAULT_CTX = 4096
# Qwen2.5/3-VL spend about one token per 28x28 pixels of an image (14 px patches, merged 2x2).
_PIXELS_PER_TOKEN = 28 * 28
_TEXT_TOKENS = 1500  # system prompt, tool definitions and a few turns of text, roughly


def request_tokens(config: Any) -> int:
    """A rough upper estimate of the context one request of this config needs."""
    screen, history = config.screen, config.history
    per_image = -(-int(screen.image_width) // 28) * -(-int(screen.image_height) // 28)
    return int(per_image * history.keep_last_screenshots + _TEXT_TOKENS + config.model.max_tokens)


async def _server_context(client: Any, profile: str, models: list[dict[str, Any]], model: str) -> int | None:
    """The context length the server runs the model with, where it says (None: unknown)."""
    entry = next((m for m in models if m.get("id") == model), models[0] if models else {})
    max_len = entry.get("max_model_len")
    if isinstance(max_len, int):  # vLLM
        return max_len
    base = client.base_url()
    try:
        if profile == "llamacpp":
            props, _ = await client.get_json(base + "/props")
            ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
            return int(ctx) if isinstance(ctx, int) else None
        if profile == "lmstudio":
            info, _ = await client.get_json(f"{base}/api/v0/models/{model}")
            ctx = info.get("loaded_context_length") or info.get("max_context_length")
            return int(ctx) if isinstance(ctx, int) else None
        if profile == "ollama":
            ps, _ = await client.get_json(base + "/api/ps")
            for item in ps.get("models") or []:
                if isinstance(item, dict) and item.get("name", "").split(":")[0] == model.split(":")[0]:
                    ctx = item.get("context_length")
                    return int(ctx) if isinstance(ctx, int) else None
    except Exception:
        return None  # a route this server (version) does not have: the context stays unknown
    return None


async def _server_checks(client: Any, config: Any) -> list[CheckResult]:
    """Which server this is (the profile), and whether this config's requests fit its context."""
    from deskpilot.agent.client import detect_profile

    checks: list[CheckResult] = []
    models: list[dict[str, Any]] = []
    server_header = ""
    try:
        data, headers = await client.get_json(client.models_url)
        models = [m for m in (data.get("data") or []) if isinstance(m, dict)] if isinstance(data, dict) else []
        server_header = headers.get("server", "")
    except Exception:
        pass  # the endpoint check above already reported it
    owned_by = next((str(m.get("owned_by")) for m in models if m.get("owned_by")), None)
    detected = detect_profile(config.model.endpoint, owned_by=owned_by, server_header=server_header)
    chosen = config.model.server
    how = f"owned_by {owned_by!r}" if owned_by else (f"Server: {server_header}" if server_header else "the URL")
    if chosen == "auto":
        checks.append(CheckResult("server", "PASS", f"{detected} (detected from {how}); --server overrides"))
    elif detected not in (chosen, "generic"):
        checks.append(CheckResult("server", "WARN", f"--server {chosen}, but it looks like {detected} (from {how})"))
    else:
        checks.append(CheckResult("server", "PASS", f"{chosen} (--server)"))
    profile = detected if chosen == "auto" else chosen
    need = request_tokens(config)
    ctx = await _server_context(client, profile, models, config.model.model)
    if profile == "ollama" and ctx is None:
        ctx = OLLAMA_DEFAULT_CTX
        fix = ("start the server with OLLAMA_CONTEXT_LENGTH=32768 (or a model with PARAMETER num_ctx 32768): "
               "Ollama silently drops the oldest messages beyond its context, and that is the task")
        if need > ctx:
            checks.append(CheckResult("context", "WARN", f"a request needs about {need} tokens; Ollama's default "
                                                   f"context is {ctx} (GPUs under 23 GiB): {fix}"))
        else:
            checks.append(CheckResult("context", "PASS", f"about {need} tokens per request; Ollama's default is {ctx}"))
        return checks
    if ctx is None:
        checks.append(CheckResult("context", "SKIP", f"the server does not say its context length; a request needs "
                                               f"about {need} tokens"))
    elif need > ctx:
        checks.append(CheckResult("context", "WARN", f"a request needs about {need} tokens, the model runs with {ctx}: "
                                               "use smaller screenshots (--image-size), keep fewer "
                                               "(history.keep_last_screenshots) or load it with a longer context"))
    else:
        checks.append(CheckResult("context", "PASS", f"about {need} tokens per request fit the context of {ctx}"))
    return checks


def run_checks(
    config: Any, *, model: bool = True, probe: str | None = None, allow_xwayland: bool = False
) -> list[CheckResult]:
    checks: list[CheckResult] = []
    display, has_display = _display_check()
    if not has_display and _wlroots_chosen(config) and os.environ.get("WAYLAND_DISPLAY"):
        # The wlroots backends speak to the compositor itself: no X display needed.
        display, has_display = CheckResult("display", "PASS", f"WAYLAND_DISPLAY={os.environ['WAYLAND_DISPLAY']} "
                                     "(wlroots backends)"), True
    checks.append(display)
    wayland_seen = False
    wayland_capture = ""
    if has_display or os.environ.get("WAYLAND_DISPLAY"):
        # Without DISPLAY, a Wayland session still gets the line that says what to do.
        screen, wayland_capture = _screen_check(allow_xwayland=allow_xwayland,
                                                capture=config.screen.capture_backend)
        checks.append(screen)
        wayland_seen = screen.status == "PASS" and screen.detail.startswith("a Wayland session")
    else:
        checks.append(CheckResult("screen", "SKIP", "no display"))
    checks.append(_dpi_check())
    checks.append(_core_check())
    if has_display or wayland_seen:
        approval = _portal_approval_check() if wayland_capture == "portal" else None
        checks.append(approval or _capture_check(config))
        checks.append(_input_check(config, wayland_capture))
        stop = _killswitch_check(config)
        if stop is not None:
            checks.append(stop)
    else:
        checks.append(CheckResult("capture", "SKIP", "no display"))
        checks.append(CheckResult("input", "SKIP", "no display"))
    if model:
        checks.extend(asyncio.run(_model_checks(config, probe=probe)))
    return checks


_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red", "SKIP": "dim"}


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    config = config_from_args(args)
    console = Console(highlight=False)
    console.print(f"deskpilot doctor · model {config.model.model} at {config.model.endpoint}")
    checks = run_checks(config, model=not args.no_model, allow_xwayland=args.allow_xwayland)
    for check in checks:
        console.print(f"[{_STYLE[check.status]}]{check.status:<4}[/] {check.name:<15} {escape(terminal_text(check.detail))}")
    console.print(verdict(checks))
    return 1 if any(c.status == "FAIL" for c in checks) else 0


def verdict(checks: list[CheckResult]) -> str:
    """The last line: "all checks passed" only when no check failed or warned."""
    failed = sum(c.status == "FAIL" for c in checks)
    warned = sum(c.status == "WARN" for c in checks)
    if failed:
        return f"{failed} failed, {warned} warning{'s' if warned != 1 else ''}"
    if warned:
        return f"no check failed, {warned} warning{'s' if warned != 1 else ''}: read the WARN line{'s' if warned != 1 else ''} above"
    return "all checks passed"
