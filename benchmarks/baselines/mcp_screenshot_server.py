"""A desktop MCP server built the way the popular ones are: the baseline of bench_mcp.py.

Run as ``python mcp_screenshot_server.py`` (stdio). Two tools, as computer-use-mcp,
Windows-MCP and the reference computer-use loop have them: ``screenshot`` grabs the screen
with mss, converts it with Pillow and returns it as a PNG (Pillow's default compression,
full resolution); ``click(x, y)`` clicks, sleeps a fixed delay for the screen to settle and
returns the new screenshot. The clicks go through XTest as deskpilot's do, so the two
servers differ in how they look and wait, not in how they press.
"""

from __future__ import annotations

import base64
import io
import time

import mss
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent
from PIL import Image

from deskpilot.input import InputController

#: The fixed wait after an action (1 s; the reference computer-use loop waits 2 s).
SETTLE_SECONDS = 1.0

server = MCPServer("baseline-desktop", log_level="WARNING")
hands = InputController("xtest")


def _shot() -> CallToolResult:
    with mss.MSS() as sct:
        raw = sct.grab(sct.monitors[1])
        image = Image.frombytes("RGB", raw.size, raw.bgra, "raw", "BGRX")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return CallToolResult(
        content=[ImageContent(type="image", data=data, mime_type="image/png"),
                 TextContent(type="text", text=f"{image.width}x{image.height}")]
    )


@server.tool()
def screenshot() -> CallToolResult:
    """Capture the screen."""
    return _shot()


@server.tool()
def click(x: int, y: int) -> CallToolResult:
    """Click at (x, y), wait for the screen, return a screenshot."""
    hands.click(x, y)
    hands.sync()
    time.sleep(SETTLE_SECONDS)
    return _shot()


if __name__ == "__main__":
    server.run("stdio")
