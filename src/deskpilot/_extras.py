"""Which install extra brings a third-party module: ``pip install deskpilot`` is the capture
library alone, so a command that needs the agent, the panel or replay names the extra to
install instead of ending in an import traceback (pyproject.toml lists the extras)."""

from __future__ import annotations

__all__ = ["EXTRA_OF_MODULE", "IN_AGENT", "missing_extra_message"]

#: Top-level module -> the extra in pyproject.toml's [project.optional-dependencies] that
#: installs it. ``agent`` includes ``panel``, ``replay`` and ``mcp``.
EXTRA_OF_MODULE: dict[str, str] = {
    "httpx": "agent",
    "httpcore": "agent",
    "rich": "agent",
    "sniffio": "agent",
    "pybase64": "agent",
    "tomli": "agent",
    "starlette": "panel",
    "uvicorn": "panel",
    "PIL": "replay",
    "mcp": "mcp",
    "ray": "ray",
    "jeepney": "wayland",
}

#: The extras that ``agent`` includes (the message names it as an alternative).
IN_AGENT = ("panel", "replay", "mcp", "wayland")


def missing_extra_message(exc: ImportError) -> str | None:
    """What to tell the user when ``exc`` is a module of an extra that is not installed;
    None for any other import error (a bug, or a broken install: the traceback helps)."""
    module = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    also = ', or "deskpilot[agent]", which includes it' if extra in IN_AGENT else ""
    return (
        f"{module} is not installed: this command needs deskpilot's {extra} extra "
        f'(pip install "deskpilot[{extra}]"{also})'
    )
