"""The replay's definition of "the same": field classes, request normalization, frame tolerance."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from deskpilot.replay import FrameTolerance, compare_frames
from deskpilot.replay._compare import (
    ABSENT,
    CompareRules,
    compare_requests,
    compare_turns,
    diff_values,
    normalize,
)

RECORD = {
    "v": 1,
    "turn": 2,
    "time": 1.0,
    "mode": "single",
    "role": "agent",
    "request": {"messages": 6, "images": 2, "bytes": 9000},
    "model": {"content": "hi", "tool_calls": [], "usage": {"prompt_tokens": 1}, "timings": {"ttfb_s": 1}, "attempts": 2, "streamed": True},
    "tool_call": {"id": "c1", "name": "click_element", "arguments": {"box": [1, 2]}},
    "result": {"ok": True, "changed": True, "changed_region": [1, 2, 3, 4], "warning": "w", "screenshot": "/abs/dump/screen_0003.png"},
    "action": {"kind": "click", "x": 10, "y": 20},
    "mapping": {"origin": [0, 0]},
    "observation": {"screenshot": "C:\\dumps\\screen_0003.png", "digest": "ab", "png_bytes": 100, "reused": False},
    "settle": {"polls": 3},
    "screen_unchanged": True,
    "action_started_early": True,
    "timings": {"model": 3.0},
}


def test_diff_values_reports_leaf_paths() -> None:
    assert diff_values({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}) == []
    assert diff_values({"a": 1.0}, {"a": 1}) == []  # JSON does not tell 1 from 1.0
    assert diff_values({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3, 4]}, "c": None}) == [
        ("a.b[1]", 2, 3),
        ("a.b[2]", ABSENT, 4),
        ("c", ABSENT, None),
    ]
    assert diff_values({"a": True}, {"a": 1}) == [("a", True, 1)]  # a bool is not a number here


def test_normalize_drops_what_measures_the_machine() -> None:
    out = normalize(RECORD, CompareRules())
    for key in ("v", "time", "timings", "settle", "action_started_early"):
        assert key not in out
    assert set(out["model"]) == {"content", "tool_calls"}
    assert out["observation"]["screenshot"] == "screen_0003.png"  # a Windows dump dir
    assert out["result"]["screenshot"] == "screen_0003.png"
    assert out["result"]["changed"] is True and out["screen_unchanged"] is True
    assert RECORD["observation"]["screenshot"].startswith("C:")  # the input is not modified


def test_screen_derived_fields_only_where_reproducible() -> None:
    kept = normalize(RECORD, CompareRules(screen_turns={2}))
    assert "changed" in kept["result"] and "screen_unchanged" in kept
    dropped = normalize(RECORD, CompareRules(screen_turns={1, 3}))
    assert not {"changed", "changed_region", "warning"} & set(dropped["result"]) and "screen_unchanged" not in dropped
    assert dropped["result"]["ok"] is True  # the rest of the payload is still compared
    real = normalize(RECORD, CompareRules(real_input=True))
    assert "changed" not in real["result"] and "digest" not in real["observation"] and "bytes" not in real["request"]
    encoding = normalize(RECORD, CompareRules(encoding=False))
    assert "png_bytes" not in encoding["observation"] and "bytes" not in encoding["request"]
    assert encoding["observation"]["digest"] == "ab"  # the pixels are still the recorded ones
    missing = normalize(RECORD, CompareRules(missing_frames={2}))
    assert "digest" not in missing["observation"] and "reused" not in missing["observation"]


def test_compare_turns_names_the_turn_and_kind() -> None:
    replayed = orjson.loads(orjson.dumps(RECORD))
    replayed["action"]["x"] = 13
    replayed["time"] = 99.0
    replayed["timings"] = {"model": 1000.0}
    out = compare_turns([RECORD], [replayed], CompareRules())
    assert [(d.turn, d.path, d.recorded, d.replayed, d.kind) for d in out] == [(2, "action.x", 10, 13, "action")]
    assert out[0].describe() == "turn 2: action.x: recorded 10, replayed 13"
    # A turn only one side has is a flow divergence; turns past last_turn are not compared.
    extra = {**RECORD, "turn": 3}
    out = compare_turns([RECORD], [RECORD, extra], CompareRules())
    assert [(d.turn, d.path, d.recorded, d.replayed, d.kind) for d in out] == [(3, "turn", ABSENT, "replayed", "flow")]
    assert compare_turns([RECORD], [RECORD, extra], CompareRules(), last_turn=2) == []


def test_open_end_compares_only_what_the_recording_has() -> None:
    recorded = {"turn": 5, "mode": "single", "request": {"messages": 9}, "ended_by": "interrupted"}
    replayed = {"turn": 5, "mode": "single", "request": {"messages": 9}, "ended_by": "error", "model": {"content": "x"}}
    assert compare_turns([recorded], [replayed], CompareRules(open_end_turn=5)) == []
    assert [d.path for d in compare_turns([recorded], [replayed], CompareRules())] == ["ended_by", "model"]


def test_stages_are_compared_separately() -> None:
    raw = {"turn": 1, "stage": "raw", "raw_png": "turn_0001/screenshot_raw.png", "actions": [{"name": "click"}]}
    other = {**raw, "raw_png": "elsewhere/screenshot_raw.png", "actions": [{"name": "move"}]}
    out = compare_turns([raw], [other], CompareRules())
    assert [(d.stage, d.path) for d in out] == [("raw", "actions[0].name")]


def _request(tool_payload: dict[str, object], url: str, size: int) -> dict[str, object]:
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]},
            {"role": "tool", "tool_call_id": "c1", "content": orjson.dumps(tool_payload).decode()},
        ],
        "_bytes": size,
        "_images": 1,
    }


def test_requests_ignore_screen_derived_payload_fields_and_foreign_encoders() -> None:
    a = _request({"ok": True, "changed": True, "changed_region": [1, 2, 3, 4]}, "data:image/png;base64,<sha256:aa len:10>", 100)
    b = _request({"ok": True, "changed": False, "changed_region": None}, "data:image/png;base64,<sha256:bb len:12>", 102)
    assert compare_requests({1: a}, {1: b}, encoding=False) == []
    strict = compare_requests({1: a}, {1: b}, encoding=True)
    assert [d.path for d in strict] == [
        "request.body.messages[1].content[0].image_url.url",
        "request.body._bytes",
    ]
    assert compare_requests({1: a}, {1: b}, encoding=True, bytes_turns=set())[0].path.endswith(".url")
    c = _request({"ok": False}, "data:image/png;base64,<sha256:aa len:10>", 100)
    out = compare_requests({1: a}, {1: c}, encoding=True)
    assert [(d.turn, d.path, d.recorded, d.replayed, d.kind) for d in out] == [
        (1, "request.body.messages[2].content.ok", True, False, "request")
    ]
    assert compare_requests({1: a, 2: a}, {1: a}, encoding=True) == []  # only turns both logged


def test_frames_with_tolerance() -> None:
    a = np.zeros((20, 30, 3), np.uint8)
    b = a.copy()
    tol = FrameTolerance(pixel_tolerance=10, max_fraction=0.01)
    assert compare_frames(a, b, tol) == (0.0, None, "")
    b[5, 7] = (8, 0, 0)  # within the per-pixel tolerance
    share, region, detail = compare_frames(a, b, tol)
    assert share == 0.0 and region is None and "within the tolerance" in detail
    b[2:4, 10:13] = 200
    share, region, _ = compare_frames(a, b, tol)
    assert share == pytest.approx(6 / 600) and region == (10, 2, 3, 2)
    share, region, detail = compare_frames(a, np.zeros((10, 30, 3), np.uint8), tol)
    assert share == 1.0 and region == (0, 0, 30, 20) and "size 30x10" in detail
    with pytest.raises(ValueError):
        FrameTolerance(pixel_tolerance=300)
    with pytest.raises(ValueError):
        FrameTolerance(max_fraction=2)
