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
