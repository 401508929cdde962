"""deskpilot as an MCP server: the hands and eyes of any MCP client (``deskpilot mcp``).

The tools (``screenshot``, ``click``, ``move_mouse``, ``drag``, ``scroll``, ``type_text``,
``press_keys``, ``wait``, ``zoom``, ``screen_info``) act through the same policy, input
thread, settle and run directory as ``deskpilot run``; see README "MCP server".
"""

from deskpilot.mcp._desktop import DEFAULT_MAX_BYTES, DEFAULT_MAX_IMAGE, Desktop, DesktopOptions
from deskpilot.mcp._serve import ServeOptions, serve
from deskpilot.mcp._server import TOOL_NAMES, build_server

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_IMAGE",
    "TOOL_NAMES",
    "Desktop",
    "DesktopOptions",
    "ServeOptions",
    "build_server",
    "serve",
]
