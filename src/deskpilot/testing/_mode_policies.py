"""Pixel-reading "models" for the team and stateless modes (what ``deskpilot demo --mode``
and ``deskpilot testserver --policy`` use).

Like :class:`~deskpilot.testing.PixelPolicy` (the single mode's), they look at the
screenshot they receive: the target is found by its colour and clicked at its centre in
the model's 0..1000 coordinates; then the text is typed and a key pressed; the run ends
when the screenshot shows the target in its "clicked" colour. Each speaks its mode's
protocol:

* :class:`TeamPolicy`: planner requests (text only, a plan tool offered) get one plan;
  executor requests (one screenshot each) get one tool call. It reads the tool names and
  argument names from the tools the request offers, so it speaks both team variants
  (commander/operator: ``spawn_operator``, ``click_element``, ``type_text``, ``press_key``,
  ``report_completion``; planner/executor: ``update_execution_plan``,
  ``click_screen_element``, ``type_text_input``, ``press_keyboard_key``,
  ``report_mission_complete``).
* :class:`StatelessPolicy`: the JSON protocol of the stateless mode, with a box around
  the target and several actions in one turn (click, type, key), then ``done``.
* :class:`AutoPolicy`: tells the mode from each request (team tools, no tools at all, or
  the single mode's tools) and answers like the matching policy (``deskpilot testserver``'s
  default, so every mode works against it unchanged).

They import nothing from the agent: all they know comes from the request, as a model's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from deskpilot.testing._policies import find_color
from deskpilot.testing._replies import Reply, tool_call

if TYPE_CHECKING:
    from deskpilot.testing._server import RecordedRequest

__all__ = ["TEAM_TOOL_NAMES", "AutoPolicy", "StatelessPolicy", "TeamPolicy"]

#: The team variants' tool names by kind: (commander/operator, planner/executor).
TEAM_TOOL_NAMES: Mapping[str, tuple[str, str]] = {
    "plan": ("spawn_operator", "update_execution_plan"),
    "click": ("click_element", "click_screen_element"),
    "type": ("type_text", "type_text_input"),
    "key": ("press_key", "press_keyboard_key"),
    "complete": ("report_completion", "report_mission_complete"),
}


#: Colour tolerance for the "clicked" colour: the stateless mode draws translucent heat over
#: the spot it clicked, which shifts the green by up to ~40 per channel.
DONE_TOLERANCE = 64


def _norm(pixel: float, size: int) -> int:
    # The geometry contract: image pixel centre -> 0..1000 (see deskpilot.geometry).
    return max(0, min(1000, round((pixel + 0.5) * 1000 / size)))


def _locate(
    request: RecordedRequest, rgb: tuple[int, int, int], tolerance: int
) -> dict[str, Any] | None:
    """The target's centre and box in 0..1000 coordinates of the newest screenshot, or None."""
    image = request.last_image
    if image is None or image.data is None:
        return None
    found = find_color(image.data, rgb, tolerance=tolerance)  # type: ignore[arg-type]
    if found is None:
        return None
    cx, cy, x1, y1, x2, y2 = found
    w, h = image.width, image.height
    return {
        "point": [_norm(cx, w), _norm(cy, h)],
        "box": [_norm(x1, w), _norm(y1, h), _norm(x2, w), _norm(y2, h)],
    }


def _tools(request: RecordedRequest) -> dict[str, dict[str, Any]]:
    """Offered tools: name -> JSON schema of its parameters."""
    tools = request.body.get("tools") if isinstance(request.body, dict) else None
    out: dict[str, dict[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            params = function.get("parameters")
            out[function["name"]] = params if isinstance(params, dict) else {}
    return out


def _fill(schema: Mapping[str, Any], values: Mapping[str, Any], why: str) -> dict[str, Any]:
    """Arguments for every required property: ``values`` where given, else a short reason
    (strings), the first enum value, or an empty list (the variants name their reasoning
    and label fields differently; a model reads the schema, and so does this)."""
    props_value = schema.get("properties")
    props: dict[str, Any] = props_value if isinstance(props_value, dict) else {}
    required_value = schema.get("required")
    required: list[Any] = required_value if isinstance(required_value, list) else list(props)
    args: dict[str, Any] = {}
    for name in required:
        spec = props.get(name, {})
        if name in values:
            args[name] = values[name]
        elif isinstance(spec, dict) and spec.get("enum"):
            args[name] = spec["enum"][0]
        elif isinstance(spec, dict) and spec.get("type") == "array":
            args[name] = []
        else:
            args[name] = why
    return args


class _ColourTask:
    """What both mode models are told: the target's colour, the colour it turns when clicked,
    its label, the text to type and the key to press (``tolerance`` per channel)."""

    def __init__(
        self,
        target: tuple[int, int, int] = (255, 0, 255),
        *,
        done_rgb: tuple[int, int, int] = (0, 200, 0),
        label: str = "TARGET button",
        text: str = "hello",
        key: str = "enter",
        tolerance: int = 24,
    ) -> None:
        self.target = tuple(target)
        self.done_rgb = tuple(done_rgb)
        self.label = label
        self.text = text
        self.key = key
        self.tolerance = tolerance
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        """The model's own state (each mode's model keeps what it needs)."""


class TeamPolicy(_ColourTask):
    """Planner + executor for the team mode, reading the target by colour (both variants).

    Executor: target colour visible -> click it; then type ``text``, press ``key``, and
    report completion once ``done_rgb`` (the clicked target's colour) is visible, with
    evidence of at least 100 characters (the mode refuses shorter).
    """

    def _start(self) -> None:
        #: (role, tool name) of every answer, in order: what a test or the demo shows.
        self.log: list[tuple[str, str]] = []
        self._after_click = 0

    def _call(
        self,
        role: str,
        tools: dict[str, dict[str, Any]],
        kind: str,
        values: dict[str, Any],
        why: str,
        content: str,
    ) -> Reply:
        name = next((n for n in TEAM_TOOL_NAMES[kind] if n in tools), None)
        if name is None:
            return Reply(content=f"I have no {kind} tool among {sorted(tools)}.")
        with self._lock:
            self.log.append((role, name))
        return Reply(content=content, tool_calls=[tool_call(name, _fill(tools[name], values, why))])

    def respond(self, request: RecordedRequest) -> Reply:
        tools = _tools(request)
        if any(n in tools for n in TEAM_TOOL_NAMES["plan"]):
            plan = (
                f"Goal 1: click the {self.label}; it turns green. Goal 2: type {self.text!r} into the "
                f"text field and press {self.key}. Done when the target is green and the text was submitted."
            )
            return self._call(
                "planner",
                tools,
                "plan",
                {"operator_instructions": plan, "instructions": plan},
                "first plan: nothing done yet",
                "PLAN: " + plan,
            )
        found = _locate(request, self.target, self.tolerance)  # type: ignore[arg-type]
        if found is not None:
            with self._lock:
                self._after_click = 0
            return self._call(
                "executor",
                tools,
                "click",
                {"position": found["point"], "label": self.label, "element_name": self.label},
                f"the {self.label} is visible",
                f"SCREEN_SHOWS: the {self.label}; clicking its centre.",
            )
        with self._lock:
            step = self._after_click
            self._after_click += 1
        if step == 0:
            return self._call(
                "executor",
                tools,
                "type",
                {"text": self.text},
                "the target is clicked, the field has the focus",
                "typing the text",
            )
        if step == 1:
            return self._call(
                "executor",
                tools,
                "key",
                {"key": self.key},
                "submit the text",
                f"pressing {self.key}",
            )
        if _locate(request, self.done_rgb, DONE_TOLERANCE) is None:  # type: ignore[arg-type]
            return Reply(
                content=f"I see neither the {self.label} nor its clicked colour {self.done_rgb}."
            )
        evidence = (
            f"The screenshot shows the {self.label} in its clicked colour (green), the text {self.text!r} "
            f"was typed into the field and {self.key} was pressed to submit it, as the task asked."
        )
        return self._call(
            "executor", tools, "complete", {"evidence": evidence}, evidence, "MISSION COMPLETE"
        )


class StatelessPolicy(_ColourTask):
    """The stateless mode's JSON protocol, reading the target by colour.

    Target visible: one turn with a box around it and three actions (click its centre,
    type ``text``, press ``key``). ``done_rgb`` visible instead: ``done``.
    """

    def _start(self) -> None:
        #: The action names of every answer, in order.
        self.log: list[list[str]] = []

    def _answer(
        self,
        observation: str,
        actions: list[dict[str, Any]],
        boxes: list[dict[str, Any]] | None = None,
    ) -> str:
        with self._lock:
            self.log.append([a["name"] for a in actions])
        out: dict[str, Any] = {"observation": observation}
        if boxes:
            out["bboxes"] = boxes
        out["actions"] = actions
        return orjson.dumps(out).decode()

    def respond(self, request: RecordedRequest) -> Reply:
        found = _locate(request, self.target, self.tolerance)  # type: ignore[arg-type]
        if found is not None:
            (x, y), (x1, y1, x2, y2) = found["point"], found["box"]
            return Reply(
                content=self._answer(
                    f"I see the {self.label}; I click it, type the text and press {self.key}.",
                    [
                        {"name": "click", "x1": x, "y1": y},
                        {"name": "type", "text": self.text},
                        {"name": "key", "keys": self.key},
                    ],
                    [{"x1": x1, "y1": y1, "x2": x2, "y2": y2, "label": self.label}],
                )
            )
        if _locate(request, self.done_rgb, DONE_TOLERANCE) is not None:  # type: ignore[arg-type]
            return Reply(
                content=self._answer(
                    f"The {self.label} is green: the text was submitted.", [{"name": "done"}]
                )
            )
        return Reply(content=self._answer(f"I cannot see the {self.label}.", [{"name": "done"}]))


#: Tool names only the team mode offers (its variant 002 shares click_element, type_text and
#: press_key with the single mode's element tools, so those tell nothing).
_TEAM_ONLY = frozenset(
    name for kind in ("plan", "complete") for name in TEAM_TOOL_NAMES[kind]
) | {"compress_memory", "archive_completed_actions", "report_progress", "report_goal_status"}


class AutoPolicy:
    """One pixel-reading model for every mode: each request is answered by the policy of
    the mode that sent it (team tools -> :class:`TeamPolicy`, no tools -> the stateless
    JSON protocol, else the single mode's ``single`` policy, e.g. a
    :class:`~deskpilot.testing.PixelPolicy`)."""

    def __init__(self, single: Any, team: TeamPolicy, stateless: StatelessPolicy) -> None:
        self.single = single
        self.team = team
        self.stateless = stateless

    def respond(self, request: RecordedRequest) -> Any:
        tools = request.tool_names
        if _TEAM_ONLY & set(tools):
            return self.team.respond(request)
        if not tools:
            return self.stateless.respond(request)
        return self.single.respond(request)
