"""The stateless mode's JSON protocol: valid, fenced, embedded, garbage, out-of-range, limits."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskpilot.agent.modes.stateless import ACTION_NAMES, BBox, ReplyAction, parse_vlm_output

# -- the happy path ----------------------------------------------------------------------------


def test_valid_reply_is_parsed_in_full() -> None:
    reply = json.dumps(
        {
            "observation": "The editor is open; I type the note.",
            "bboxes": [{"x1": 100, "y1": 80, "x2": 400, "y2": 160, "label": "text area"}],
            "actions": [
                {"name": "click", "x1": 250, "y1": 120},
                {"name": "type", "text": "hello"},
                {"name": "key", "keys": "ctrl+s"},
                {"name": "drag", "x1": 100, "y1": 100, "x2": 300, "y2": 150},
                {"name": "scroll", "x1": 500, "y1": 600, "direction": "down", "amount": 2},
                {"name": "move", "x1": 0, "y1": 1000},
                {"name": "right_click", "x1": 10, "y1": 20},
                {"name": "double_click", "x1": 30, "y1": 40},
                {"name": "done"},
            ],
        }
    )
    out = parse_vlm_output(reply, max_actions=10)
    assert out.source == "json" and out.rejected == ()
    assert out.observation == "The editor is open; I type the note."
    assert out.bboxes == (BBox(100, 80, 400, 160, "text area"),)
    assert [a.name for a in out.actions] == [
        "click",
        "type",
        "key",
        "drag",
        "scroll",
        "move",
        "right_click",
        "double_click",
        "done",
    ]
    assert out.actions[0] == ReplyAction("click", 250, 120)
    assert out.actions[1].text == "hello" and out.actions[2].keys == "ctrl+s"
    assert out.actions[3] == ReplyAction("drag", 100, 100, 300, 150)
    assert out.actions[4] == ReplyAction("scroll", 500, 600, dy=2)
    assert out.done
    assert out.as_record()["actions"][0] == {"name": "click", "x1": 250, "y1": 120}


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("CLICK", "click"),
        ("Right-Click", "right_click"),
        ("double click", "double_click"),
        ("DoubleClick", "double_click"),
        ("left_click", "click"),
        ("hover", "move"),
        ("Move", "move"),
        ("DRAG", "drag"),
    ],
)
def test_action_names_are_case_insensitive_with_aliases(written: str, name: str) -> None:
    item: dict[str, Any] = {"name": written, "x1": 1, "y1": 2}
    if name == "drag":
        item.update(x2=3, y2=4)
    out = parse_vlm_output(json.dumps({"observation": "", "actions": [item]}))
    assert [a.name for a in out.actions] == [name]


def test_coordinates_are_clamped_rounded_and_coerced() -> None:
    out = parse_vlm_output(
        '{"observation": "o", "actions": [{"name": "click", "x1": -50, "y1": 1000.6},'
        ' {"name": "drag", "x": "250.4", "y": 1e9, "x2": 2000, "y2": -0.4}],'
        ' "bboxes": [{"x1": 900, "y1": 950, "x2": 100, "y2": 1200}, [5, 6, 7, 8]]}'
    )
    assert out.actions == (ReplyAction("click", 0, 1000), ReplyAction("drag", 250, 1000, 1000, 0))
    # Inverted corners are swapped.
    assert out.bboxes == (BBox(100, 950, 900, 1000), BBox(5, 6, 7, 8))
    assert out.rejected == ()


# -- finding the JSON -----------------------------------------------------------------------------


def test_fenced_json_with_trailing_commas() -> None:
    text = 'Here you go:\n```json\n{"observation": "fenced", "actions": [{"name": "click", "x1": 1, "y1": 2},],}\n```\nbye'
    out = parse_vlm_output(text)
    assert out.source == "fenced" and out.observation == "fenced"
    assert out.actions == (ReplyAction("click", 1, 2),)


def test_first_object_block_inside_prose() -> None:
    text = 'I think {this is not json} but {"observation": "inner {brace} \\"quoted\\"", "actions": []} and {"observation": "second"}'
    out = parse_vlm_output(text)
    assert out.source == "block"
    assert out.observation == 'inner {brace} "quoted"'


def test_the_block_that_is_a_reply_wins_over_an_earlier_example() -> None:
    text = 'Example {"a":1}. Answer: {"observation":"o","actions":[{"type":"click","x":1,"y":2}]}'
    out = parse_vlm_output(text)
    assert out.source == "block" and out.observation == "o"
    assert out.actions == (ReplyAction("click", 1, 2),)
    # Only "bboxes" also marks the reply; nested objects of a non-reply block do not.
    out = parse_vlm_output('{"x": {"observation": "nested"}} then {"bboxes": []}')
    assert out.json_text == '{"bboxes": []}'
    # The same preference among fences.
    out = parse_vlm_output('```json\n{"schema": 1}\n```\n```json\n{"observation": "f"}\n```')
    assert out.source == "fenced" and out.observation == "f"
    # Without a block that looks like a reply, the first one that parses (seed behaviour).
    out = parse_vlm_output('first {"a": 1} second {"b": 2}')
    assert out.json_text == '{"a": 1}' and out.actions == ()


def test_think_blocks_are_ignored() -> None:
    out = parse_vlm_output('<think>maybe {"observation": "wrong"}</think>{"observation": "right"}')
    assert out.observation == "right" and out.source == "json"


@pytest.mark.parametrize(
    "text",
    [
        '{"observation": "<think>", "actions": [{"name": "move"}]}',
        '{"observation": "<think>", "actions": [{"name": "move"}],}',
        'ok\n```json\n{"observation": "a </think> b", "actions": [{"name": "move"}]}\n```',
        'I will do it: {"observation": "<think>", "actions": [{"name": "move"}]} done.',
    ],
)
def test_think_tags_inside_the_reply_strings_do_not_cut_it(text: str) -> None:
    out = parse_vlm_output(text)
    assert out.source in ("json", "fenced", "block") and "think>" in out.observation
    # The action list was read (its one item refused for a reason of its own).
    assert [(r.kind, r.index) for r in out.rejected] == [("action", 0)]
    # A reply that only appears inside the reasoning is still not the answer.
    cut = parse_vlm_output('<think>maybe {"observation": "wrong", "actions": []}')
    assert cut.source == "text" and cut.actions == ()


@pytest.mark.parametrize(
    "text",
    ["I clicked the button.", "[1, 2, 3]", '{"unclosed": ', "", "   ", "{{{{", '"just a string"'],
)
def test_garbage_becomes_the_observation_with_no_actions(text: str) -> None:
    out = parse_vlm_output(text)
    assert out.source == "text" and out.actions == () and out.bboxes == ()
    assert out.observation == text.strip()
    assert out.rejected and out.rejected[0].kind == "json"


def test_non_string_inputs_do_not_crash() -> None:
    assert parse_vlm_output(None).observation == ""
    assert parse_vlm_output(b'{"observation": "bytes"}').observation == "bytes"
    assert parse_vlm_output(12).observation == "12"


# -- rejections -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({"name": "click"}, "click needs x1 and y1"),
        ({"name": "click", "x1": 5}, "click needs x1 and y1"),
        ({"name": "drag", "x1": 1, "y1": 2}, "drag needs x2 and y2"),
        ({"name": "fly", "x1": 1, "y1": 2}, "unknown action 'fly'"),
        ({"x1": 1, "y1": 2}, 'needs a "name"'),
        ({"name": "click", "x1": "left", "y1": 2}, "click x1 must be a number"),
        ({"name": "click", "x1": True, "y1": 2}, "must be a number"),
        ({"name": "click", "x1": None, "y1": 2}, "must be a number"),
        ({"name": "type"}, 'type needs "text"'),
        ({"name": "type", "text": ""}, "non-empty"),
        ({"name": "type", "text": "x" * 5000}, "longer than"),
        ({"name": "key"}, 'key needs "keys"'),
        ({"name": "key", "keys": "ctrl+nosuchkey"}, "unknown key"),
        ({"name": "scroll", "x1": 5, "y1": 5}, "scroll needs"),
        ({"name": "scroll", "direction": "sideways"}, "direction must be"),
        ({"name": "scroll", "x1": 3, "direction": "up"}, "both x1 and y1"),
        ({"name": "scroll", "direction": "up", "amount": 0}, "amount must be >= 1"),
        ("click at 5,5", "must be an object"),
        ([1, 2], "must be an object"),
    ],
)
def test_bad_actions_are_rejected_with_a_reason(item: Any, reason: str) -> None:
    out = parse_vlm_output(
        json.dumps({"observation": "o", "actions": [{"name": "move", "x1": 1, "y1": 1}, item]})
    )
    assert out.actions == (ReplyAction("move", 1, 1),)
    assert len(out.rejected) == 1
    rejection = out.rejected[0]
    assert rejection.kind == "action" and rejection.index == 1
    assert reason in rejection.reason
    assert rejection.describe().startswith("action 2: ")


@pytest.mark.parametrize(
    ("boxes", "reason"),
    [
        ([{"x1": 1, "y1": 2, "x2": 3}], "needs x1, y1, x2, y2"),
        ([[1, 2, 3]], "4 numbers"),
        (["box"], "must be an object"),
        ([{"x1": "a", "y1": 2, "x2": 3, "y2": 4}], "bbox x1 must be a number"),
        ([{"x1": float("nan"), "y1": 2, "x2": 3, "y2": 4}], "finite"),
    ],
)
def test_bad_bboxes_are_rejected_with_a_reason(boxes: list[Any], reason: str) -> None:
    text = json.dumps({"observation": "o", "bboxes": boxes}, allow_nan=True).replace("NaN", '"nan"')
    out = parse_vlm_output(text)
    assert out.bboxes == ()
    assert [r.kind for r in out.rejected] == ["bbox"] and reason in out.rejected[0].reason


def test_limits_per_turn() -> None:
    actions = [{"name": "click", "x1": i, "y1": i} for i in range(12)]
    boxes = [[i, i, i + 1, i + 1] for i in range(5)]
    out = parse_vlm_output(
        json.dumps({"observation": "o", "actions": actions, "bboxes": boxes}),
        max_actions=8,
        max_bboxes=3,
    )
    assert len(out.actions) == 8 and len(out.bboxes) == 3
    over = [r for r in out.rejected if "over the limit" in r.reason]
    assert [(r.kind, r.index) for r in over] == [("bbox", 3), ("bbox", 4)] + [
        ("action", i) for i in range(8, 12)
    ]


def test_wrong_shapes_of_the_top_level_fields() -> None:
    out = parse_vlm_output('{"observation": ["a"], "actions": "click", "bboxes": 5}')
    kinds = sorted(r.kind for r in out.rejected)
    assert kinds == ["action", "bbox", "observation"]
    assert out.observation == '["a"]'
    single = parse_vlm_output(
        '{"observation": "o", "actions": {"name": "click", "x1": 1, "y1": 1}}'
    )
    assert single.actions == (ReplyAction("click", 1, 1),)
    missing = parse_vlm_output('{"actions": []}')
    assert missing.observation == "" and missing.rejected[0].kind == "observation"


def test_long_observation_is_cut() -> None:
    out = parse_vlm_output(json.dumps({"observation": "x" * 5000}), max_observation_chars=100)
    assert len(out.observation) == 100 and "cut" in out.rejected[0].reason


def test_marks_for_the_overlay() -> None:
    out = parse_vlm_output(
        '{"observation": "", "actions": [{"name": "type", "text": "hi"}, {"name": "scroll", "direction": "up"},'
        ' {"name": "drag", "x1": 1, "y1": 2, "x2": 3, "y2": 4}], "bboxes": [{"x1": 1, "y1": 2, "x2": 3, "y2": 4, "label": "L"}]}'
    )
    marks = [a.mark() for a in out.actions]
    assert marks[0].points == () and marks[0].detail == "hi"
    assert marks[1].points == ((500, 500),) and marks[1].detail == "up 3"
    assert marks[2].points == ((1, 2), (3, 4))
    assert out.bboxes[0].mark().label == "L"
    assert [a.describe() for a in out.actions] == [
        'type "hi"',
        "scroll up 3 500,500",
        "drag 1,2>3,4",
    ]


def test_adversarial_sizes_finish() -> None:
    # Deep nesting, brace floods and a huge reply: parsed (as text) without an error.
    for text in [
        "{" * 100_000,
        '{"a":' * 5000 + "1" + "}" * 5000,
        "x" * 1_000_000 + "{",
        '{"observation": "' + "\\" * 10001 + '"}',
    ]:
        out = parse_vlm_output(text)
        assert out.actions == ()


# -- never a crash ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)
names = st.sampled_from(
    [*ACTION_NAMES, "Click", "RIGHT-CLICK", "scroll_down", "hotkey", "bogus", ""]
)
action_items = st.fixed_dictionaries(
    {"name": names},
    optional={
        "x1": json_values | st.integers(-5000, 5000),
        "y1": st.integers(-5000, 5000) | st.text(max_size=5),
        "x2": st.floats(allow_nan=True, allow_infinity=True),
        "y2": st.integers(),
        "text": json_values,
        "keys": st.sampled_from(["enter", "ctrl+s", "ctrl++", "", "nope+x", "+"]) | json_values,
        "direction": st.sampled_from(["up", "down", "left", "right", "in"]) | json_values,
        "amount": json_values,
        "dx": json_values,
        "dy": st.integers(-100, 100),
    },
)
replies = st.fixed_dictionaries(
    {},
    optional={
        "observation": json_values,
        "actions": st.lists(action_items | json_values, max_size=12) | json_values,
        "bboxes": st.lists(
            st.lists(st.integers(-2000, 2000), min_size=3, max_size=5) | json_values, max_size=10
        ),
    },
)


@given(reply=replies, wrap=st.sampled_from(["plain", "fence", "prose", "trailing"]))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_never_crashes_on_structured_replies(reply: dict[str, Any], wrap: str) -> None:
    text = json.dumps(reply)
    if wrap == "fence":
        text = f"ok\n```json\n{text}\n```"
    elif wrap == "prose":
        text = f"I will do it: {text} done."
    elif wrap == "trailing":
        text = text[:-1] + ",}" if text.endswith("}") and len(text) > 2 else text
    out = parse_vlm_output(text, max_actions=6, max_bboxes=4)
    assert len(out.actions) <= 6 and len(out.bboxes) <= 4
    for action in out.actions:
        for value in (action.x1, action.y1, action.x2, action.y2):
            assert value is None or 0 <= value <= 1000
        assert action.name in ACTION_NAMES
    for box in out.bboxes:
        assert 0 <= box.x1 <= box.x2 <= 1000 and 0 <= box.y1 <= box.y2 <= 1000
    orjson.dumps(out.as_record())  # the record is always JSON-ready
    if isinstance(reply.get("actions"), list):
        seen = len(out.actions) + len(
            [r for r in out.rejected if r.kind == "action" and r.index is not None]
        )
        assert seen == len(reply["actions"])


@given(text=st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_never_crashes_on_any_text(text: str) -> None:
    out = parse_vlm_output(text)
    assert isinstance(out.observation, str)
    orjson.dumps(out.as_record())


def test_reasoning_is_read_for_its_last_complete_answer() -> None:
    """In a thinking model's reasoning the first JSON block is the draft and the last complete
    one the answer (the seeds read the first block of the content, where there is one answer)."""
    draft = '{"observation": "draft", "actions": [{"name": "click", "x1": 1, "y1": 2}]}'
    final = '{"observation": "final", "actions": [{"name": "click", "x1": 500, "y1": 412}]}'
    cut = '{"observation": "cut short", "actions": [{"name": "cli'
    text = f"First idea: {draft}. Hmm, no. Answer: {final}\nor maybe {cut}"
    assert parse_vlm_output(text).observation == "draft"  # the content's rule: the first block
    out = parse_vlm_output(text, from_reasoning=True)
    assert out.observation == "final" and out.actions == (ReplyAction("click", 500, 412),)
    fenced = f"```json\n{draft}\n```\nthen\n```json\n{final}\n```"
    assert parse_vlm_output(fenced, from_reasoning=True).observation == "final"
    # A nested object after the answer is not an answer of its own.
    assert parse_vlm_output(f'{draft} {final} {{"note": 1}}', from_reasoning=True).observation == "final"
    # One block, or the whole text as JSON: the same as from the content.
    assert parse_vlm_output(final, from_reasoning=True).observation == "final"
    assert parse_vlm_output(f"thinking... {draft}", from_reasoning=True).observation == "draft"
