"""The models' own formats: Qwen3-VL's computer_use (``--toolset qwen``), UI-TARS's text
protocol (``--toolset uitars`` / ``uitars-1.0``) and every tool-call text syntax of the
supported servers' templates.

Runs go through the real loop, HTTP client and local test server on the simulated
desktop (1920x1080; target button at (880, 400, 160, 90)).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deskpilot.agent import load_config, run_agent
from deskpilot.agent.client._toolcalls import reasoning_tool_calls, split_content_tool_calls
from deskpilot.agent.tools._core import toolset
from deskpilot.agent.tools._qwen import grid_to_physical, physical_to_grid
from deskpilot.agent.tools._uitars import parse_uitars, smart_resize, to_physical
from deskpilot.commands.run import _EXIT_CODES
from deskpilot.geometry import Mapping, Rect
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop


def ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"call_{next(counter)}"


def run(
    tmp_path: Path, script: list[Any], toolset: str, **flags: Any
) -> tuple[Any, ModelServer, SimulatedDesktop]:
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy(script)) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "run.quiet": True,
                "agent.toolset": toolset,
                "agent.max_steps": 8,
                **flags,
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg,
            "click the target, then type hi",
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
        )
    return result, srv, desk


def inside_target(point: tuple[int, int]) -> bool:
    x, y = point
    return 880 <= x < 1040 and 400 <= y < 490


# -- Qwen3-VL computer_use -----------------------------------------------------------------------------


def test_qwen_grid_maps_g_to_g_over_1000_of_the_image() -> None:
    """Qwen3-VL's value g names the pixel at g / 1000 of the image.

    Source: QwenLM/Qwen3-VL ``qwen-vl-finetune/tools/process_bbox.ipynb``
    (``convert_to_qwen2vl_format``) made the training data with
    ``round(x / w * 1000)``; its inverse ``g / 1000 * w`` is what trycua/cua maps with
    (``libs/python/agent/cua_agent/loops/generic_vlm.py``, ``_unnormalize_coordinate``:
    ``round((x / 1000.0) * width)``). deskpilot mapped ``floor((g + 0.5) * w / 1000)``:
    half a cell right and down, [0, 0] -> (1, 1) on a 4K screen and the last row and
    column out of reach.
    """
    full = Mapping(Rect(-1920, 0, 1920, 1080), 1536, 864)
    assert grid_to_physical(full, 0, 0) == (-1920, 0)
    assert grid_to_physical(full, 1000, 1000) == (-1, 1079)  # the last pixel, clamped onto it
    assert grid_to_physical(full, 500, 500) == (-1920 + 960, 540)
    assert grid_to_physical(full, 999, 999) == (-1920 + 1918, 1079)  # round(1918.08), round(1078.92)
    assert grid_to_physical(full, 2000, -5) == (-1, 0)  # clamped into 0..1000
    uhd = Mapping(Rect(0, 0, 3840, 2160), 1536, 864)
    assert grid_to_physical(uhd, 0, 0) == (0, 0)
    assert grid_to_physical(uhd, 1000, 1000) == (3839, 2159)
    assert grid_to_physical(uhd, 333, 667) == (1279, 1441)  # round(1278.72), round(1440.72)
    crop = Mapping(Rect(100, 50, 1000, 500), 1000, 500)  # a crop sandbox: the grid covers it only
    assert grid_to_physical(crop, 0, 0) == (100, 50)
    assert grid_to_physical(crop, 1000, 1000) == (1099, 549)
    assert grid_to_physical(crop, 250, 500) == (100 + 250, 50 + 250)
    for width in (1280, 1920, 2560, 3840):
        area = Mapping(Rect(0, 0, width, width * 9 // 16), 1536, 864)
        for x in range(0, width, 7):
            # The official quantization, then deskpilot's inverse: back on the pixel, or
            # within the half grid cell that pixel shares with its neighbours.
            g = round(x / width * 1000)
            px, _ = grid_to_physical(area, g, 0)
            assert abs(px - x) <= width / 2000 + 0.5, (width, x, g, px)
        if width * 9 // 16 < 1000:
            continue  # fewer pixels than grid values: not every value has its own pixel
        for g in range(0, 1000):
            # The payload reports the model's own value back.
            px, py = grid_to_physical(area, g, g)
            assert physical_to_grid(area, px, py) == [g, g], (width, g)


@pytest.mark.parametrize("style", ["native", "content"])
def test_qwen_computer_use_acts_and_terminates(tmp_path: Path, style: str) -> None:
    script = [
        Reply(
            tool_calls=[("computer_use", {"action": "left_click", "coordinate": [500, 412]})],
            style=style,
        ),
        Reply(tool_calls=[("computer_use", {"action": "type", "text": "hi"})], style=style),
        Reply(tool_calls=[("computer_use", {"action": "key", "keys": ["enter"]})], style=style),
        Reply(
            tool_calls=[("computer_use", {"action": "terminate", "status": "success"})], style=style
        ),
    ]
    result, srv, desk = run(tmp_path, script, "qwen")
    assert result.outcome == "answered", result.error
    assert len(desk.target_clicks) == 1 and inside_target(desk.target_clicks[0])
    assert desk.submitted == ["hi"]
    first = srv.requests[0]
    assert first.tool_names == ["computer_use"]
    assert (
        "computer_use" in first.messages[0]["content"]
        and "action=terminate" in first.messages[0]["content"]
    )
    assert srv.problems == []


def test_qwen_terminate_failure_and_answer(tmp_path: Path) -> None:
    failed, _, _ = run(
        tmp_path / "a",
        [Reply(tool_calls=[("computer_use", {"action": "terminate", "status": "failure"})])],
        "qwen",
    )
    assert failed.outcome == "failed" and _EXIT_CODES["failed"] == 7
    answered, _, _ = run(
        tmp_path / "b",
        [Reply(tool_calls=[("computer_use", {"action": "answer", "text": "42 files"})])],
        "qwen",
    )
    assert answered.outcome == "answered" and answered.answer == "42 files"


def test_qwen_every_pointer_action_maps_through_the_grid(tmp_path: Path) -> None:
    actions = [
        {"action": "mouse_move", "coordinate": [100, 100]},
        {"action": "double_click", "coordinate": [500, 412]},
        {"action": "triple_click", "coordinate": [500, 412]},
        {"action": "right_click", "coordinate": [900, 900]},
        {"action": "middle_click", "coordinate": [900, 900]},
        {"action": "left_click_drag", "coordinate": [200, 200]},
        {"action": "scroll", "coordinate": [500, 500], "pixels": -3},
        {"action": "hscroll", "pixels": 2},
        {"action": "wait", "time": 0},
        {"action": "bogus"},
        {"action": "terminate", "status": "success"},
    ]
    result, srv, desk = run(
        tmp_path,
        [Reply(tool_calls=[("computer_use", a)]) for a in actions],
        "qwen",
        **{"agent.max_steps": 12},
    )
    assert result.outcome == "answered", result.error
    kinds = [e["action"] for e in desk.events]
    assert "drag" in kinds and "scroll" in kinds
    clicks = [e for e in desk.events if e["action"] == "click"]
    assert [(c["button"], c["count"]) for c in clicks] == [
        ("left", 2),
        ("left", 3),
        ("right", 1),
        ("middle", 1),
    ]
    drag = next(e for e in desk.events if e["action"] == "drag")
    assert drag["end"] == list(
        grid_to_physical(Mapping(Rect(0, 0, 1920, 1080), 768, 432), 200, 200)
    )
    scrolls = [e for e in desk.events if e["action"] == "scroll"]
    assert scrolls[0]["dy"] == 3 and scrolls[1]["dx"] == 2  # negative pixels scroll down
    last = [m for m in srv.requests[-1].messages if m.get("role") == "tool"]
    bogus = orjson.loads(last[-1]["content"])
    assert bogus["ok"] is False and bogus["error"]["type"] == "invalid_args"


# QwenLM/Qwen3-VL cookbooks/utils/agent_function_call.py, class ComputerUse (the qwen_agent tool
# the computer_use cookbook registers), copied word for word; the resolution is the one the
# cookbook gives Qwen3-VL (display 1000x1000).
OFFICIAL_COMPUTER_USE_DESCRIPTION = """\
Use a mouse and keyboard to interact with a computer, and take screenshots.
* This is an interface to a desktop GUI. You do not have access to a terminal or applications menu. You must click on desktop icons to start applications.
* Some applications may take time to start or process actions, so you may need to wait and take successive screenshots to see the results of your actions. E.g. if you click on Firefox and a window doesn't open, try wait and taking another screenshot.
* The screen's resolution is 1000x1000.
* Whenever you intend to move the cursor to click on an element like an icon, you should consult a screenshot to determine the coordinates of the element before moving the cursor.
* If you tried clicking on a program or link but it failed to load, even after waiting, try adjusting your cursor position so that the tip of the cursor visually falls on the element that you want to click.
* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the element. Don't click boxes on their edges."""
OFFICIAL_COMPUTER_USE_ACTIONS = """\
The action to perform. The available actions are:
* `key`: Performs key down presses on the arguments passed in order, then performs key releases in reverse order.
* `type`: Type a string of text on the keyboard.
* `mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.
* `left_click`: Click the left mouse button at a specified (x, y) pixel coordinate on the screen.
* `left_click_drag`: Click and drag the cursor to a specified (x, y) pixel coordinate on the screen.
* `right_click`: Click the right mouse button at a specified (x, y) pixel coordinate on the screen.
* `middle_click`: Click the middle mouse button at a specified (x, y) pixel coordinate on the screen.
* `double_click`: Double-click the left mouse button at a specified (x, y) pixel coordinate on the screen.
* `triple_click`: Triple-click the left mouse button at a specified (x, y) pixel coordinate on the screen (simulated as double-click since it's the closest action).
* `scroll`: Performs a scroll of the mouse scroll wheel.
* `hscroll`: Performs a horizontal scroll (mapped to regular scroll).
* `wait`: Wait specified seconds for the change to happen.
* `terminate`: Terminate the current task and report its completion status.
* `answer`: Answer a question."""


def test_qwen_computer_use_schema_is_the_official_definition() -> None:
    """The ``computer_use`` tool deskpilot sends is the definition Qwen3-VL was trained on.

    Source: QwenLM/Qwen3-VL ``cookbooks/utils/agent_function_call.py`` (``ComputerUse``:
    its ``description`` and ``parameters``). deskpilot's copy had drifted in two places: the
    last bullet ended "unless asked" (``MobileUse``'s wording) and ``triple_click`` had lost
    "(simulated as double-click since it's the closest action)". deskpilot really
    triple-clicks: its system prompt says so instead of an edited schema.
    """
    tool = toolset("qwen").get("computer_use")
    assert tool is not None
    assert tool.description == OFFICIAL_COMPUTER_USE_DESCRIPTION
    props = tool.parameters["properties"]
    assert props["action"]["description"] == OFFICIAL_COMPUTER_USE_ACTIONS
    assert props["keys"] == {"description": "Required only by `action=key`.", "type": "array"}
    assert props["text"] == {"description": "Required only by `action=type` and `action=answer`.", "type": "string"}
    assert props["coordinate"] == {
        "description": "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) "
        "coordinates to move the mouse to.",
        "type": "array",
    }
    assert props["pixels"]["description"] == (
        "The amount of scrolling to perform. Positive values scroll up, negative values scroll down. "
        "Required only by `action=scroll` and `action=hscroll`."
    )
    assert list(props) == ["action", "keys", "text", "coordinate", "pixels", "time", "status"]
    assert tool.parameters["required"] == ["action"]
    prompt = toolset("qwen").prompt or ""
    assert "triple_click really clicks three times" in prompt
    assert "unless asked" not in tool.description



# -- UI-TARS ---------------------------------------------------------------------------------------------


def test_smart_resize_matches_the_reference_values() -> None:
    # qwen_vl_utils.smart_resize on the sizes deskpilot sends.
    assert smart_resize(756, 1344) == (756, 1344)
    assert smart_resize(1080, 1920) == (1092, 1932)
    assert smart_resize(216, 384) == (224, 392)
    assert smart_resize(5000, 8000)[0] * smart_resize(5000, 8000)[1] <= 16384 * 28 * 28


def test_uitars_coordinates_per_version() -> None:
    m = Mapping(Rect(0, 0, 1920, 1080), 1344, 756)  # smart-resized: unchanged (multiples of 28)
    assert to_physical(m, [672, 311], "1.5") == (960, 444)
    assert to_physical(m, [500, 412], "1.0") == (960, 444)
    assert to_physical(m, [0, 0, 1344, 756], "1.5") == (960, 540)  # a box acts at its centre
    odd = Mapping(Rect(0, 0, 1920, 1080), 1536, 864)  # smart-resized to 1540 x 868
    assert to_physical(odd, [770, 434], "1.5") == (960, 540)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Thought: go\nAction: click(start_box='(960,296)')",
            [("click", {"start_box": [960.0, 296.0]})],
        ),
        (
            "Thought: go\nAction: click(start_box='<|box_start|>(235,512)<|box_end|>')",
            [("click", {"start_box": [235.0, 512.0]})],
        ),
        (
            "Thought: go\nAction: click(point='<point>100 200</point>')",
            [("click", {"start_box": [100.0, 200.0]})],
        ),
        (
            "Thought: go\nAction: drag(start_point='<point>1 2</point>', end_point='<point>3 4</point>')",
            [("drag", {"start_box": [1.0, 2.0], "end_box": [3.0, 4.0]})],
        ),
        (
            "Thought: go\nAction: type(content='it's here\\n')",
            [("type", {"content": "it's here\n"})],
        ),
        (
            "Thought: go\nAction: hotkey(key='ctrl c')\n\nclick(start_box='(5,6)')",
            [("hotkey", {"key": "ctrl c"}), ("click", {"start_box": [5.0, 6.0]})],
        ),
        (
            "Reflection: r Action_Summary: s\nAction: finished(content='all \"done\"')",
            [("finished", {"content": 'all "done"'})],
        ),
        (
            "Thought: go\nAction: scroll(start_box='(10,20,30,40)', direction='down')",
            [("scroll", {"start_box": [10.0, 20.0, 30.0, 40.0], "direction": "down"})],
        ),
        ("Just talking, no action.", []),
    ],
)
def test_uitars_parser(text: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    assert [(a.action_type, a.inputs) for a in parse_uitars(text)] == expected


DESKTOP = "bytedance/UI-TARS-desktop multimodal/gui-agent/action-parser"
AGENT_TARS = "bytedance/UI-TARS-desktop multimodal/agent-tars/core"


@pytest.mark.parametrize(
    ("text", "expected", "source"),
    [
        pytest.param(
            "Thought: go\nAction: click(start_box='<bbox>637 964 637 964</bbox>')",
            [("click", {"start_box": [637.0, 964.0, 637.0, 964.0]})],
            f"{DESKTOP}/test/defaultActionParser.test.ts '<bbox> but no comma'; "
            "src/ActionParserHelper.ts parseRoughFromCallString: <bbox> tags dropped, spaces -> commas",
            id="bbox",
        ),
        pytest.param(
            "Thought: I need to click this button\nAction\uff1aclick(start_box='(100,200)')",
            [("click", {"start_box": [100.0, 200.0]})],
            f"{DESKTOP}/test/hallucinationCases.test.ts 'should handle with Chinese colon (1)'; "
            "packages/ui-tars/action-parser/src/actionParser.ts: text.split(/Action[:\uff1a]/)",
            id="full-width-colon",
        ),
        pytest.param(
            "\n\nAction\uff1aclick(start_box='<bbox>191 21 191 21</bbox>')",
            [("click", {"start_box": [191.0, 21.0, 191.0, 21.0]})],
            f"{DESKTOP}/test/hallucinationCases.test.ts 'should handle with Chinese colon (2)'",
            id="full-width-colon-bbox",
        ),
        pytest.param(
            'click(start_box="(100,200)")',
            [("click", {"start_box": [100.0, 200.0]})],
            f"{DESKTOP}/test/hallucinationCases.test.ts \"should handle input without 'Action:'\"; "
            "src/FomatParsers.ts FallbackFormatParser: the first name(...) call in the reply",
            id="no-action-line",
        ),
        pytest.param(
            "Thought: The box is focused, type.\nAction: type(text='hello')",
            [("type", {"content": "hello"})],
            "bytedance/UI-TARS-desktop multimodal/gui-agent/shared/src/utils/actions.ts "
            "unifyActionInputName: text -> content",
            id="type-text",
        ),
        pytest.param(
            "Thought: t\nAction: type(text='it's here')",
            [("type", {"content": "it's here"})],
            "unifyActionInputName (text -> content) with ui_tars's unescaped-quote handling of content",
            id="type-text-quote",
        ),
        pytest.param(
            "<Thought>I need to perform this action</Thought>\nAction_Summary: Click and type text\n"
            "Action: click(start_box='(100,200)')\n</Output>",
            [("click", {"start_box": [100.0, 200.0]})],
            f"{DESKTOP}/test/defaultActionParser.test.ts 'O1 mode'; src/FomatParsers.ts O1FormatParser: "
            "/Action:\\s*([\\s\\S]*?)\\s*<\\/Output>/",
            id="trailing-output",
        ),
        pytest.param(
            "Thought: t\nAction: click(point='<point>510 150<point>')",
            [("click", {"start_box": [510.0, 150.0]})],
            f"{DESKTOP}/src/ActionParserHelper.ts parseCoordinates: strips the tag's characters "
            "(/[()[\\]<point></point>]/g), whatever closes it",
            id="point-without-slash",
        ),
        pytest.param(
            "Thought: t\nAction: click(point='<point>150 315",
            [("click", {"start_box": [150.0, 315.0]})],
            f"{AGENT_TARS}/src/environments/local/browser/browser-gui-agent.ts pointPatterns: "
            "'Missing closing tag and quote'",
            id="point-without-closing-tag",
        ),
        pytest.param(
            "Thought: t\nAction: click(point='<point>150 315</point>",
            [("click", {"start_box": [150.0, 315.0]})],
            f"{AGENT_TARS}/tests/browser/parse-action.test.ts 'should parse click action with missing quote'",
            id="missing-closing-quote",
        ),
        pytest.param(
            "Thought: t\nAction: scroll(direction='up",
            [("scroll", {"direction": "up"})],
            f"{AGENT_TARS}/tests/browser/parse-action.test.ts 'should parse scroll action with missing quote'",
            id="missing-quote-and-parenthesis",
        ),
        pytest.param(
            "Thought: t\nAction: hotkey(key='ctrl c'",
            [("hotkey", {"key": "ctrl c"})],
            f"{AGENT_TARS}/tests/browser/parse-action.test.ts 'should parse key action with missing quote' "
            "(key(key='Ctrl+C' ); bytedance/UI-TARS codes/ui_tars/action_parser.py appends the missing ')'",
            id="missing-closing-parenthesis",
        ),
        pytest.param(
            "Thought: t\nAction: drag(start_point='<point>100 200</point>' end_point='<point>300 400</point>')",
            [("drag", {"start_box": [100.0, 200.0], "end_box": [300.0, 400.0]})],
            f"{AGENT_TARS}/tests/browser/parse-action.test.ts 'should parse drag action' (no comma)",
            id="missing-comma",
        ),
        pytest.param(
            "Thought: t\nAction: drag(start_box='(1,2)' end_box='(3,4)')",
            [("drag", {"start_box": [1.0, 2.0], "end_box": [3.0, 4.0]})],
            "the same form with start_box/end_box",
            id="missing-comma-boxes",
        ),
    ],
)
def test_uitars_reads_the_forms_bytedances_parsers_accept(
    text: str, expected: list[tuple[str, dict[str, Any]]], source: str
) -> None:
    """Each form ByteDance's current parsers accept is read as they read it (``source``).

    deskpilot's port of ``codes/ui_tars/action_parser.py`` answered each of these with "no
    action" or a parse error, while the parsers ByteDance ships today
    (bytedance/UI-TARS-desktop: the ``@ui-tars/action-parser`` package, the GUI agent's
    DefaultActionParser with its format chain, agent-tars's browser parser) act on them.
    """
    assert source
    assert [(a.action_type, a.inputs) for a in parse_uitars(text)] == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["Action:", "Action\uff1a", "click(", "type(", "drag(", "text=", "start_box=", "point=", "'", '"', ")",
             "(", ",", " ", "\n\n", "<point>", "</point>", "<bbox>", "</bbox>", "</Output>", "1", "nan", "\\"]
        ),
        max_size=30,
    ).map("".join)
)
def test_uitars_parser_reads_or_refuses_any_text(text: str) -> None:
    # The tolerant reading never loops, never raises anything but the error the model is told.
    try:
        actions = parse_uitars(text)
    except ValueError:
        return
    assert all(isinstance(a.action_type, str) for a in actions)


def test_uitars_forms_that_name_no_action_stay_no_action() -> None:
    # ByteDance's FallbackFormatParser throws "No valid GUI action string was detected" and an
    # empty Action: gets "There is no GUI action detected"
    # (multimodal/gui-agent/action-parser/test/hallucinationCases.test.ts): nothing is done.
    assert parse_uitars("Thought: Empty action\nAction:") == []
    assert parse_uitars("I would print(x) here, but the task is done.") == []
    thought = parse_uitars("<Thought>look</Thought>\nAction: wait()\n</Output>")[0].thought
    assert thought == "look"


def test_uitars_run_acts_on_a_full_width_colon_and_a_bare_call(tmp_path: Path) -> None:
    script = [
        "Thought: The magenta target is in the middle.\nAction\uff1aclick(start_box='<bbox>378 173 378 173</bbox>')",
        "finished(content='Clicked.')",
    ]
    result, _srv, desk = run(tmp_path, script, "uitars")
    assert result.outcome == "answered" and result.answer == "Clicked.", result.error
    assert len(desk.target_clicks) == 1 and inside_target(desk.target_clicks[0])


def test_uitars_parser_rejects_unreadable_actions() -> None:
    with pytest.raises(ValueError, match="cannot read the action"):
        parse_uitars("Thought: x\nAction: click(start_box=)")


# The simulated desktop sends 768x432 images: smart-resized to 756x420, so (378, 173) is
# x 0.5, y 0.412 of the image (the target's centre) for UI-TARS-1.5.
@pytest.mark.parametrize(
    ("toolset", "point"),
    [("uitars", "(378,173)"), ("uitars-1.0", "<|box_start|>(500,412)<|box_end|>")],
)
def test_uitars_run_clicks_types_and_finishes(tmp_path: Path, toolset: str, point: str) -> None:
    script = [
        f"Thought: The magenta target is in the middle.\nAction: click(start_box='{point}')",
        "Thought: Now type.\nAction: type(content='hi\\n')",
        "Thought: Done.\nAction: finished(content='Clicked and typed.')",
    ]
    result, srv, desk = run(tmp_path, script, toolset)
    assert result.outcome == "answered", result.error
    assert result.answer == "Clicked and typed."
    assert len(desk.target_clicks) == 1 and inside_target(desk.target_clicks[0])
    assert desk.submitted == ["hi"]
    assert all("tools" not in r.body for r in srv.requests)  # a text protocol: no tools sent
    assert "## Action Space" in srv.requests[0].messages[0]["content"]
    second = srv.requests[1].messages
    assert [m["role"] for m in second if m["role"] == "tool"] == []
    assert "Result: click:" in orjson.dumps(second[-1]).decode()
    assert srv.problems == []


def test_uitars_text_without_action_gets_a_reminder_then_no_action(tmp_path: Path) -> None:
    result, srv, _desk = run(tmp_path, ["I think it is done.", "Still no action."], "uitars")
    assert result.outcome == "no_action" and len(srv.requests) == 2
    assert "Action:" in str(srv.requests[1].messages[-1]["content"])


def test_uitars_unreadable_action_reaches_the_model_as_the_parse_error(tmp_path: Path) -> None:
    """A reply whose ``Action:`` does not parse is answered with the parser's own error.

    Source: bytedance/UI-TARS ``codes/ui_tars/action_parser.py``
    (``parse_action_to_structure_output``) raises ``ValueError("Action can't parse: ...")``
    for such a reply, and the desktop parser (bytedance/UI-TARS-desktop
    ``multimodal/gui-agent/action-parser/src/DefaultActionParser.ts``) returns that error as
    ``errorMessage``. deskpilot built the same error but answered "unknown tool ''":
    ``execute_tool_call`` looked the (empty) name up before reading the parse error.
    """
    script = [
        "Thought: click it\nAction: click(start_box=)",
        "Thought: done\nAction: finished(content='ok')",
    ]
    result, srv, desk = run(tmp_path, script, "uitars")
    assert result.outcome == "answered", result.error
    told = orjson.dumps(srv.requests[1].messages[-1]).decode()
    assert "cannot read the action" in told and "invalid_args" in told
    assert "unknown tool" not in told and "unknown_tool" not in told
    assert [e for e in desk.events if e["action"] != "release_all"] == []


@pytest.mark.parametrize(
    ("model", "script"),
    [
        ("bytedance/ui-tars-1.5-7b", ["Thought: t\nAction: click(start_box='(378,173)')", "Action: finished(content='ok')"]),
        ("UI-TARS-7B-DPO", ["Thought: t\nAction: click(start_box='(500,412)')", "Action: finished(content='ok')"]),
        (
            "qwen/qwen3-vl-4b",
            [
                Reply(tool_calls=[("computer_use", {"action": "left_click", "coordinate": [500, 412]})]),
                Reply(tool_calls=[("computer_use", {"action": "terminate", "status": "success"})]),
            ],
        ),
    ],
)
def test_toolset_auto_speaks_the_models_language(tmp_path: Path, model: str, script: list[Any]) -> None:
    """``--toolset auto`` picks the tool set from the model id: a UI-TARS or Qwen3-VL answering in
    its trained language acts instead of ending with unknown_tool / no_action."""
    result, srv, desk = run(tmp_path, script, "auto", **{"model.model": model})
    assert result.outcome == "answered", result.error
    assert len(desk.target_clicks) == 1 and inside_target(desk.target_clicks[0])
    assert srv.problems == []


def test_uitars_call_user_ends_failed(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, ["Thought: I need a password.\nAction: call_user()"], "uitars")
    assert result.outcome == "failed"


# -- tool-call text syntaxes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "name", "arguments"),
    [
        # Qwen3.5/3.6 (Qwen3-Coder XML), LM Studio bug-tracker #2115
        (
            "<tool_call>\n<function=click_element>\n<parameter=label>\nOK button\n</parameter>\n"
            "<parameter=box>\n[500, 412]\n</parameter>\n</function>\n</tool_call>",
            "click_element",
            {"label": "OK button", "box": [500, 412]},
        ),
        # the same, cut off before its closing tags
        (
            "<tool_call>\n<function=type_text>\n<parameter=text>\nhello world",
            "type_text",
            {"text": "hello world"},
        ),
        # Llama 3.1 custom format
        ('<function=press_key>{"key": "enter"}</function>', "press_key", {"key": "enter"}),
        # GLM-4.5
        (
            "<tool_call>click_element\n<arg_key>label</arg_key>\n<arg_value>OK</arg_value>\n"
            "<arg_key>box</arg_key>\n<arg_value>[1, 2]</arg_value>\n</tool_call>",
            "click_element",
            {"label": "OK", "box": [1, 2]},
        ),
        # Mistral v3 and v11
        (
            '[TOOL_CALLS][{"name": "press_key", "arguments": {"key": "tab"}}]',
            "press_key",
            {"key": "tab"},
        ),
        ('[TOOL_CALLS]press_key[ARGS]{"key": "tab"}', "press_key", {"key": "tab"}),
        # Llama 3.x python tag
        (
            '<|python_tag|>{"name": "press_key", "parameters": {"key": "f5"}}',
            "press_key",
            {"key": "f5"},
        ),
        # Llama 3.2 / Llama 4 pythonic (vLLM --tool-call-parser pythonic, llama.cpp)
        (
            "[click_element(label='OK', box=[500, 412])]",
            "click_element",
            {"label": "OK", "box": [500, 412]},
        ),
        # Gemma 3 tool_code fence
        ('```tool_code\npress_key(key="enter")\n```', "press_key", {"key": "enter"}),
        # Hermes / Qwen2.5 JSON (worked before)
        (
            '<tool_call>\n{"name": "press_key", "arguments": {"key": "a"}}\n</tool_call>',
            "press_key",
            {"key": "a"},
        ),
    ],
)
def test_every_template_call_syntax_is_read(
    content: str, name: str, arguments: dict[str, Any]
) -> None:
    rest, calls = split_content_tool_calls(content, new_id=ids())
    assert [(c.name, c.arguments, c.error) for c in calls] == [(name, arguments, None)]
    assert rest == ""


def test_calls_in_reasoning_only_when_the_content_is_empty() -> None:
    reasoning = 'I will click.\n<tool_call>\n{"name": "click_element", "arguments": {"label": "a", "box": [1, 2]}}\n</tool_call>'
    calls = reasoning_tool_calls("", reasoning, new_id=ids())
    assert [(c.name, c.source) for c in calls] == [("click_element", "reasoning")]
    assert reasoning_tool_calls("I answer instead.", reasoning, new_id=ids()) == []
    # prose reasoning with a JSON example is not a call
    assert (
        reasoning_tool_calls("", 'Maybe {"name": "x", "arguments": {}} would do', new_id=ids())
        == []
    )
    # a think block holding the call, nothing after it (the same bug through a raw template)
    rest, calls = split_content_tool_calls(f"<think>{reasoning}</think>", new_id=ids())
    assert [c.name for c in calls] == ["click_element"] and rest == ""
    # a call merely considered in the think block, with a visible answer, is not a call
    rest, calls = split_content_tool_calls(
        f"<think>{reasoning}</think>The answer is 4.", new_id=ids()
    )
    assert calls == []


@pytest.mark.parametrize(
    ("content", "finish", "verdict"),
    [
        ("Done: the file is saved.", "stop", "answered"),
        ("Done.", None, "answered"),  # a server that does not say: a complete JSON body
        ("Action: none needed, the task is complete.", "stop", "answered"),
        ("Thought: go\nAction: click(start_box='(1,2)')", "stop", "no_action"),
        ("<think>I should click</think>", "stop", "no_action"),
        ("", "stop", "no_action"),
        ("The answer so far", "length", "truncated"),
        ("", "length", "truncated"),
        ("Something", "content_filter", "no_action"),
    ],
)
def test_final_verdict(content: str, finish: str | None, verdict: str) -> None:
    from deskpilot.agent.modes.single import final_verdict

    assert final_verdict(content, finish) == verdict


def test_uitars_typed_text_is_masked_in_every_record(tmp_path: Path) -> None:
    script = [
        "Thought: Click.\nAction: click(start_box='(378,173)')",
        "Thought: Type it.\nAction: type(content='s3cretword\\n')",
        "Thought: Done.\nAction: finished(content='ok')",
    ]
    result, _, desk = run(tmp_path, script, "uitars", **{"safety.mask_typed_text": True})
    assert result.outcome == "answered" and desk.submitted == ["s3cretword"]
    for name in ("turns.jsonl", "exchange.jsonl", "summary.json"):
        assert "s3cretword" not in (result.run_dir / name).read_text(), name


def test_pythonic_lookalikes_in_prose_are_not_calls() -> None:
    for text in [
        "[see below]",
        "The list is [a(1), b(2)] as shown.",
        "[open(os.system('x'))]",
        "[f(x=y)]",
    ]:
        rest, calls = split_content_tool_calls(text, new_id=ids())
        assert calls == [] and rest == text
