"""Local OpenAI-compatible model servers for tests, benchmarks and the demo.

``ModelServer(policy)`` serves ``POST /v1/chat/completions`` (streamed and not) and
``GET /v1/models`` on 127.0.0.1, validates and records every request, and answers what
its policy says: :class:`ScriptedPolicy` (a fixed conversation, faults included) or
:class:`PixelPolicy` (finds a coloured target in the screenshot it receives and clicks
it, types, presses a key, answers), and its team- and stateless-mode counterparts
:class:`TeamPolicy` and :class:`StatelessPolicy`. :func:`serve` runs one in the foreground.

Example::

    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy, tool_call

    with ModelServer(ScriptedPolicy([Reply(tool_calls=[tool_call("press_key", {"key": "enter"})]),
                                     "Done."])) as server:
        run_agent(endpoint=server.endpoint)
        assert not server.problems

The rest of what tests, benchmarks and the demo need, and nothing in the product imports
(``deskpilot demo`` loads them when it runs): ``_desktop`` (a simulated screen and hands for
loop tests without a display), ``_demo_app`` (the demo's Tk target app), ``_chromium`` (a
headless Chromium driven over CDP), ``_xvfb`` (the one way to start a private Xvfb) and
``_weston`` (a headless Wayland session, weston with Xwayland).
"""

from deskpilot.testing._mode_policies import AutoPolicy, StatelessPolicy, TeamPolicy
from deskpilot.testing._policies import PixelPolicy, ReplyPolicy, ScriptedPolicy, find_color
from deskpilot.testing._replies import Fault, Reply, reply_from_json, tool_call
from deskpilot.testing._server import ModelServer, RecordedRequest, serve
from deskpilot.testing._validate import ImageInfo, validate_chat_request

# The room's internal interface (ARCHITECTURE.md, "Faces"): what the demo command, the
# test server command and the eval sessions import from here; not for users, so not in
# __all__. Loaded on first use: the demo needs the agent, Chromium's driver needs fcntl
# (not on Windows), and the model server needs none of them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from deskpilot.testing._chromium import Chromium as Chromium
    from deskpilot.testing._chromium import find_chromium as find_chromium
    from deskpilot.testing._demo import DemoResult as DemoResult
    from deskpilot.testing._demo import run_demo as run_demo
    from deskpilot.testing._demo import virtual_display as virtual_display
    from deskpilot.testing._examples import EXAMPLES as EXAMPLES
    from deskpilot.testing._examples import example_items as example_items
    from deskpilot.testing._examples import example_path as example_path
    from deskpilot.testing._xvfb import xvfb as xvfb

_INTERNAL = {
    **dict.fromkeys(("Chromium", "find_chromium"), "_chromium"),
    **dict.fromkeys(("DemoResult", "run_demo", "virtual_display"), "_demo"),
    **dict.fromkeys(("EXAMPLES", "example_items", "example_path"), "_examples"),
    "xvfb": "_xvfb",
}


def __getattr__(name: str) -> object:
    home = _INTERNAL.get(name)
    if home is None:
        raise AttributeError(f"module 'deskpilot.testing' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"deskpilot.testing.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
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
]
