"""``deskpilot mcp``: this desktop as an MCP server, for Claude Desktop, LM Studio, VS Code, Cursor...

    deskpilot mcp                            stdio (what a client's config starts)
    deskpilot mcp --http 8766                streamable HTTP on 127.0.0.1:8766/mcp, with a token
    deskpilot mcp --read-only                only screenshot, zoom and screen_info
    deskpilot mcp --tools screenshot,click   only these tools

The tools act through the same safety layer as ``deskpilot run`` (policy, kill switch,
window rules); every session writes a run directory (``deskpilot report``/``replay``).
stdout carries the protocol: messages go to stderr.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def _size(text: str) -> tuple[int, int]:
    w, sep, h = text.lower().partition("x")
    if not sep or not w.strip().isdigit() or not h.strip().isdigit() or int(w) < 64 or int(h) < 64:
        raise argparse.ArgumentTypeError(f"expected WxH like 1920x1080 (at least 64x64), got {text!r}")
    return int(w), int(h)


def _address(text: str) -> tuple[str | None, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected [HOST:]PORT, got {text!r}")
    return (host.strip("[]") or None), int(port)


def register(subparsers: Any) -> None:
    from deskpilot.commands.run import add_safety_options, add_xwayland_option

    parser = subparsers.add_parser(
        "mcp",
        help="serve this desktop to MCP clients (Claude Desktop, LM Studio, VS Code, Cursor)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--http", metavar="[HOST:]PORT", type=_address,
                        help="serve streamable HTTP at http://HOST:PORT/mcp (default host 127.0.0.1) instead of stdio")
    parser.add_argument("--token", default="generate",
                        help='HTTP bearer token: "generate" (default: a new one, printed once), "off" (loopback only), '
                        "or the token (16+ characters of letters, digits, ._~-)")
    parser.add_argument("--coordinates", choices=("pixels", "norm1000"), default="pixels",
                        help="what x, y mean: pixels of the screenshot image (default) or 0..1000 over it")
    parser.add_argument("--image-size", dest="max_image", type=_size, metavar="WxH",
                        help="largest screenshot size (default 1920x1080; the screen is fit into it)")
    parser.add_argument("--max-bytes", dest="max_bytes", type=int,
                        help="largest image in a result, bytes of base64 (default 950000: a result stays under 1 MB)")
    parser.add_argument("--read-only", dest="read_only", action="store_true",
                        help="serve only screenshot, zoom and screen_info")
    parser.add_argument("--tools", help="comma-separated allowlist of tools")
    parser.add_argument("--max-steps", dest="max_steps", type=int, help="actions per session (default: no limit)")
    parser.add_argument("--max-seconds", dest="max_seconds", type=float,
                        help="session wall-time limit (default: none; the client paces the session)")
    parser.add_argument("--monitor", type=int, help="1-based monitor the screenshots show by default")
    parser.add_argument("--dry-run", dest="dry_run", action="store_true", default=None,
                        help="record input actions instead of sending them")
    parser.add_argument("--runs-dir", dest="runs_dir", help="where run directories go (default ./runs)")
    parser.add_argument("--config", metavar="PATH", help="TOML config file (default ./deskpilot.toml if present)")
    parser.add_argument("--set", dest="set_values", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="any setting, e.g. --set agent.settle_max=1.0 (repeatable)")
    add_xwayland_option(parser)
    add_safety_options(parser)
    parser.set_defaults(handler=handle)


#: No wall-time limit unless --max-seconds: the safety layer's hard cap becomes a year.
_NO_LIMIT_SECONDS = 365 * 24 * 3600.0


def handle(args: argparse.Namespace) -> int:
    from deskpilot._errors import ConfigError
    from deskpilot.commands.run import config_from_args
    from deskpilot.mcp import (
        DEFAULT_MAX_BYTES,
        DEFAULT_MAX_IMAGE,
        TOOL_NAMES,
        DesktopOptions,
        ServeOptions,
        serve,
    )

    extra: dict[str, Any] = {"run.quiet": True}
    if args.max_seconds is None:
        extra["safety.hard_cap_seconds"] = _NO_LIMIT_SECONDS
    config = config_from_args(args, extra)
    tools = None
    if args.tools:
        tools = tuple(t.strip() for t in args.tools.split(",") if t.strip())
        unknown = sorted(set(tools) - set(TOOL_NAMES))
        if unknown:
            raise ConfigError(f"--tools: unknown {', '.join(unknown)} (one of {', '.join(TOOL_NAMES)})", where="--tools")
    if args.max_steps is not None and args.max_steps < 1:
        raise ConfigError("--max-steps must be at least 1", where="--max-steps")
    max_bytes = args.max_bytes if args.max_bytes is not None else DEFAULT_MAX_BYTES
    if max_bytes < 10_000:
        raise ConfigError("--max-bytes must be at least 10000", where="--max-bytes")
    desktop = DesktopOptions(
        coordinates=args.coordinates,
        max_image=args.max_image or DEFAULT_MAX_IMAGE,
        max_bytes=max_bytes,
        read_only=args.read_only,
        max_steps=args.max_steps,
    )
    serve_options = ServeOptions(tools=tools, token=args.token, allow_xwayland=args.allow_xwayland)
    if args.http is not None:
        host, port = args.http
        serve_options.transport, serve_options.port = "http", port
        serve_options.host = host or "127.0.0.1"
    return serve(config, desktop, serve_options)
