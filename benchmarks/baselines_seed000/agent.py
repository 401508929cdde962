"""Seed 000's ``run_agent`` loop (agent.py + scenarios.py + utils.py), instrumented."""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from baselines_seed000.png import capture_screenshot_png

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)

TOOLS_SCHEMA: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "observe_screen", "description": "Capture the screen.",
                                      "parameters": {"type": "object", "properties": {}, "required": []}}},
    {"type": "function", "function": {"name": "click_element", "description": "Click an element.",
                                      "parameters": {"type": "object", "properties": {"label": {"type": "string"},
                                                                                      "box": {"type": "array"}},
                                                     "required": ["label", "box"]}}},
    {"type": "function", "function": {"name": "type_text", "description": "Type text.",
                                      "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                                                     "required": ["text"]}}},
    {"type": "function", "function": {"name": "press_key", "description": "Press a key.",
                                      "parameters": {"type": "object", "properties": {"key": {"type": "string"}},
                                                     "required": ["key"]}}},
]


@dataclass
class BaselineResult:
    answer: str
    steps: int
    #: Per turn: seconds from the parsed reply to the next request (the overhead), with
    #: the name of the tool that turn ran.
    overheads: list[tuple[str, float]] = field(default_factory=list)
    #: Per turn: seconds spent encoding the screenshot (observe turns only).
    encode: list[float] = field(default_factory=list)


def post_json(payload: dict[str, Any], endpoint: str, timeout: float) -> dict[str, Any]:
    data = json.dumps(payload).encode("utf-8")
    req = urllib.request.Request(endpoint, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))  # type: ignore[no-any-return]


def ok_payload(extra: dict[str, Any] | None = None) -> str:
    return json.dumps({"ok": True, **(extra or {})})


def err_payload(kind: str, message: str) -> str:
    return json.dumps({"ok": False, "error": {"type": kind, "message": message}})


def parse_box(box: Any) -> tuple[float, float, float, float]:
    if isinstance(box, list) and len(box) == 2 and all(isinstance(v, list) for v in box):
        x1, y1, x2, y2 = box[0][0], box[0][1], box[1][0], box[1][1]
    elif isinstance(box, list) and len(box) == 2:
        x1, y1, x2, y2 = box[0], box[1], box[0], box[1]
    else:
        x1, y1, x2, y2 = box
    c = [min(1000.0, max(0.0, float(v))) for v in (x1, y1, x2, y2)]
    return min(c[0], c[2]), min(c[1], c[3]), max(c[0], c[2]), max(c[1], c[3])


def prune_old_screenshots(messages: list[dict[str, Any]], keep_last: int) -> None:
    seen = 0
    for msg in reversed(messages):
        content = msg.get("content")
        if msg.get("role") == "user" and isinstance(content, list) and any(p.get("type") == "image_url" for p in content):
            seen += 1
            if seen > keep_last:
                msg["content"] = [p if p.get("type") != "image_url" else {"type": "text", "text": "[old screenshot]"}
                                  for p in content]


def prune_old_thinks(messages: list[dict[str, Any]], keep_last: int) -> None:
    seen = 0
    for msg in reversed(messages):
        if msg.get("role") == "assistant" and isinstance(msg.get("content"), str) and "<think>" in msg["content"]:
            seen += 1
            if seen > keep_last:
                msg["content"] = _THINK.sub("", msg["content"]).strip()


class Tools:
    def __init__(self, hands: Any, target_w: int, target_h: int) -> None:
        self.hands = hands
        self.target_w, self.target_h = target_w, target_h
        self.screen_w, self.screen_h = 1920, 1080
        self.dump_idx = 1
        self.encode_times: list[float] = []

    def execute(self, name: str, arg_str: Any, call_id: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        def tool(content: str) -> dict[str, Any]:
            return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}

        try:
            args = json.loads(arg_str) if isinstance(arg_str, str) and arg_str else (arg_str or {})
        except json.JSONDecodeError as exc:
            return tool(err_payload("invalid_json", str(exc))), None
        if name == "observe_screen":
            t0 = time.perf_counter()
            png, self.screen_w, self.screen_h = capture_screenshot_png(self.target_w, self.target_h)
            self.encode_times.append(time.perf_counter() - t0)
            self.dump_idx += 1
            url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            user = {"role": "user", "content": [{"type": "text", "text": "captured image data"},
                                                {"type": "image_url", "image_url": {"url": url}}]}
            return tool(ok_payload({"screen_w": self.screen_w, "screen_h": self.screen_h})), user
        if name == "click_element":
            x1, y1, x2, y2 = parse_box(args.get("box"))
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            px = int((cx / 1000.0) * (self.screen_w - 1))
            py = int((cy / 1000.0) * (self.screen_h - 1))
            self.hands.move(px, py)
            time.sleep(0.08)
            self.hands.click(px, py)
            time.sleep(0.12)
            return tool(ok_payload({"x": px, "y": py})), None
        if name == "type_text":
            text = "".join(ch for ch in str(args.get("text", "")) if ord(ch) < 128)
            self.hands.type_text(text)
            time.sleep(0.1)
            return tool(ok_payload()), None
        if name == "press_key":
            self.hands.key(str(args.get("key")))
            time.sleep(0.1)
            return tool(ok_payload()), None
        return tool(err_payload("unknown_tool", name)), None


def run_baseline_agent(
    endpoint: str,
    task: str,
    hands: Any,
    *,
    model: str = "qwen3-vl-8b-instruct",
    max_steps: int = 10,
    step_delay: float = 0.4,
    keep_last_screenshots: int = 2,
    keep_last_thinks: int = 2,
    target_w: int = 1536,
    target_h: int = 864,
    timeout: float = 240.0,
) -> BaselineResult:
    tools = Tools(hands, target_w, target_h)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a desktop agent."},
        {"role": "user", "content": task},
    ]
    tool_msg, user_msg = tools.execute("observe_screen", "{}", "initial")
    if user_msg is not None:
        messages.append(user_msg)
    result = BaselineResult(answer="", steps=0)
    replied_at: float | None = None
    last_tool = "observe_screen"
    for _step in range(max_steps):
        payload = {"model": model, "messages": messages, "tools": TOOLS_SCHEMA, "tool_choice": "auto",
                   "temperature": 0.6, "max_tokens": 2048}
        if replied_at is not None:
            # post_json, split so the overhead ends where urllib takes over (json.dumps of
            # the whole conversation included, as in the seed).
            data = json.dumps(payload).encode("utf-8")
            req = urllib.request.Request(endpoint, data=data, headers={"Content-Type": "application/json"})
            result.overheads.append((last_tool, time.perf_counter() - replied_at))
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                response = json.loads(resp.read().decode("utf-8"))
        else:
            response = post_json(payload, endpoint, timeout)
        replied_at = time.perf_counter()
        result.steps += 1
        message = response["choices"][0]["message"]
        messages.append(message)
        prune_old_thinks(messages, keep_last_thinks)
        calls = message.get("tool_calls") or []
        if not calls:
            result.answer = _THINK.sub("", message.get("content") or "").strip()
            break
        call = calls[0]
        fn = call["function"]
        last_tool = fn["name"]
        tool_msg, user_msg = tools.execute(fn["name"], fn.get("arguments"), call.get("id", "call"))
        messages.append(tool_msg)
        for extra in calls[1:]:
            messages.append({"role": "tool", "tool_call_id": extra.get("id", "x"), "name": extra["function"]["name"],
                             "content": err_payload("too_many_tool_calls", "one tool call per step")})
        if user_msg is not None:
            messages.append(user_msg)
            prune_old_screenshots(messages, keep_last_screenshots)
        time.sleep(step_delay)
    result.encode = tools.encode_times
    return result
