"""Policies: who decides what the test server answers.

A policy is any object with ``respond(request) -> Reply | Fault`` (sync or async), or a
plain callable of that shape. Two are provided:

* :class:`ScriptedPolicy` plays a fixed list of answers, one per request received (a
  retried request consumes the next one, so ``[Fault.http(500), Reply(...)]`` scripts
  "fail once, then succeed").
* :class:`PixelPolicy` plays a small agent that actually looks: it decodes the newest
  screenshot of the request, finds the target by colour, and clicks its centre in the
  model's 0..1000 coordinates, then types, presses a key and answers. Its step is the
  number of assistant messages already in the request, so it is stateless (a retry or
  a second run starts at the right step). Asked ``report_color`` (``deskpilot doctor``'s
  image probe), it names the main colour of the image it received.
"""

from __future__ import annotations

import inspect
import io
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from deskpilot.testing._replies import Fault, Reply, tool_call

if TYPE_CHECKING:
    from deskpilot.testing._server import RecordedRequest

__all__ = ["PixelPolicy", "ReplyPolicy", "ScriptedPolicy", "color_name", "find_color", "resolve_reply"]

Answer = Reply | Fault


@runtime_checkable
class ReplyPolicy(Protocol):
    """How the scripted model server answers a request (not the safety :class:`deskpilot.safety.Policy`)."""

    def respond(self, request: RecordedRequest) -> Any:
        """Return (or return an awaitable of) a Reply or a Fault."""


async def resolve_reply(policy: ReplyPolicy | Callable[[RecordedRequest], Any], request: RecordedRequest) -> Answer:
    """Ask ``policy`` for its answer to ``request`` (sync or async; str/dict accepted)."""
    respond = policy.respond if isinstance(policy, ReplyPolicy) else policy
    result = respond(request)
    if inspect.isawaitable(result):
        result = await result
    return _coerce(result)


def _coerce(item: Any) -> Answer:
    if isinstance(item, (Reply, Fault)):
        return item
    if isinstance(item, str):
        return Reply(content=item)
    if isinstance(item, dict):
        return Reply(**item)
    raise TypeError(f"a policy must answer a Reply, a Fault, a str or a dict, not {item!r}")


class ScriptedPolicy:
    """Answers ``replies`` in order, one per request.

    Items: :class:`Reply`, :class:`Fault`, a ``str`` (content-only reply) or a ``dict`` of
    ``Reply`` fields. When the script runs out: ``on_exhausted="error"`` answers HTTP 500
    ("script exhausted", so a test sees the extra request), ``"repeat"`` repeats the last
    item, ``"final"`` answers a content-only "Done." reply.
    """

    def __init__(self, replies: Sequence[Reply | Fault | str | dict[str, Any]], *,
                 on_exhausted: str = "error") -> None:
        if on_exhausted not in ("error", "repeat", "final"):
            raise ValueError(f"on_exhausted must be error, repeat or final, not {on_exhausted!r}")
        self.replies = [_coerce(r) for r in replies]
        self.on_exhausted = on_exhausted
        self.position = 0
        self._lock = threading.Lock()

    def respond(self, request: RecordedRequest) -> Answer:
        with self._lock:
            position = self.position
            self.position += 1
        if position < len(self.replies):
            return self.replies[position]
        if self.on_exhausted == "repeat" and self.replies:
            return self.replies[-1]
        if self.on_exhausted == "final":
            return Reply(content="Done.")
        return Fault.http(500, f"script exhausted: request {position + 1} but only "
                               f"{len(self.replies)} replies were scripted")

    @property
    def remaining(self) -> int:
        return max(0, len(self.replies) - self.position)


def find_color(png: bytes, rgb: tuple[int, int, int], *, tolerance: int = 24,
               min_pixels: int = 20) -> tuple[float, float, int, int, int, int] | None:
    """Where colour ``rgb`` is in a PNG: ``(cx, cy, x1, y1, x2, y2)`` in image pixels
    (centre of the matching pixels' bounding box; inclusive corners), or ``None`` with
    fewer than ``min_pixels`` matches. Needs Pillow (the ``replay`` extra; ``agent`` has it)."""
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            'PixelPolicy needs Pillow to decode screenshots: pip install "deskpilot[replay]"'
        ) from exc
    import numpy as np

    with Image.open(io.BytesIO(png)) as im:
        pixels = np.asarray(im.convert("RGB"), dtype=np.int16)
    diff = np.abs(pixels - np.asarray(rgb, dtype=np.int16)).max(axis=2)
    mask = diff <= tolerance
    if int(mask.sum()) < min_pixels:
        return None
    ys = np.flatnonzero(mask.any(axis=1))
    xs = np.flatnonzero(mask.any(axis=0))
    x1, x2, y1, y2 = int(xs[0]), int(xs[-1]), int(ys[0]), int(ys[-1])
    return (x1 + x2) / 2, (y1 + y2) / 2, x1, y1, x2, y2


#: Colour names :func:`color_name` chooses from.
COLOR_NAMES: dict[str, tuple[int, int, int]] = {
    "black": (0, 0, 0), "white": (255, 255, 255), "grey": (128, 128, 128),
    "red": (255, 0, 0), "green": (0, 160, 0), "blue": (0, 0, 255),
    "yellow": (255, 255, 0), "cyan": (0, 255, 255), "magenta": (255, 0, 255),
    "orange": (255, 140, 0), "purple": (128, 0, 128),
}


def color_name(png: bytes) -> str:
    """The name (from :data:`COLOR_NAMES`) nearest to the mean colour of a PNG."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        mean = np.asarray(im.convert("RGB"), dtype=np.float64).reshape(-1, 3).mean(axis=0)
    return min(COLOR_NAMES, key=lambda n: float(((np.asarray(COLOR_NAMES[n]) - mean) ** 2).sum()))


def _norm(pixel: float, size: int) -> int:
    # The geometry contract: image pixel centre -> 0..1000 (see deskpilot.geometry).
    return max(0, min(1000, round((pixel + 0.5) * 1000 / size)))


class PixelPolicy:
    """Finds a coloured target in the screenshot it receives and works through ``steps``.

    Steps (by name): ``"click"`` (``click_element`` with ``label`` and ``box`` at the
    target's centre, as ``[x, y]``, or ``[x1, y1, x2, y2]`` with ``box_format="bbox"``),
    ``"move"`` + ``"click_mouse"`` (seed 001's ``move_mouse {x, y}`` and ``click_mouse``),
    ``"type"`` (``type_text {text}``), ``"key"`` (``press_key {key}``), ``"observe"``
    (``observe_screen``), ``"done"`` (a final answer without tool calls). Tool names can be
    renamed with ``tool_names``. If the target is not in the image, the policy answers a
    final message saying so (the run ends, the test sees it in ``request.reply``).
    """

    DEFAULT_TOOLS: ClassVar[dict[str, str]] = {
        "click": "click_element", "move": "move_mouse", "click_mouse": "click_mouse",
        "type": "type_text", "key": "press_key", "observe": "observe_screen",
    }

    def __init__(
        self,
        target: tuple[int, int, int] = (255, 0, 0),
        *,
        label: str = "target",
        text: str = "hello",
        key: str = "enter",
        steps: Sequence[str] = ("click", "type", "key", "done"),
        final: str = "Done: clicked the target, typed the text and pressed the key.",
        tolerance: int = 24,
        min_pixels: int = 20,
        box_format: str = "point",
        tool_names: dict[str, str] | None = None,
        style: str = "native",
        think: bool = False,
    ) -> None:
        unknown = [s for s in steps if s not in (*self.DEFAULT_TOOLS, "done")]
        if unknown:
            raise ValueError(f"unknown PixelPolicy steps {unknown}; use {sorted((*self.DEFAULT_TOOLS, 'done'))}")
        if box_format not in ("point", "bbox"):
            raise ValueError("box_format must be 'point' or 'bbox'")
        self.target = tuple(target)
        self.label = label
        self.text = text
        self.key = key
        self.steps = tuple(steps)
        self.final = final
        self.tolerance = tolerance
        self.min_pixels = min_pixels
        self.box_format = box_format
        self.tools = {**self.DEFAULT_TOOLS, **(tool_names or {})}
        self.style = style
        self.think = think
        #: What each answered step found: (step, image size, target box) for test messages.
        self.log: list[dict[str, Any]] = []

    def _locate(self, request: RecordedRequest) -> tuple[dict[str, Any] | None, str]:
        image = request.last_image
        if image is None or image.data is None:
            return None, "no screenshot in the request"
        found = find_color(image.data, self.target, tolerance=self.tolerance, min_pixels=self.min_pixels)  # type: ignore[arg-type]
        if found is None:
            return None, f"no pixels of colour {self.target} in the {image.width}x{image.height} screenshot"
        cx, cy, x1, y1, x2, y2 = found
        w, h = image.width, image.height
        return {
            "point": [_norm(cx, w), _norm(cy, h)],
            "bbox": [_norm(x1, w), _norm(y1, h), _norm(x2, w), _norm(y2, h)],
            "image_size": [w, h],
        }, ""

    def respond(self, request: RecordedRequest) -> Answer:
        if "report_color" in request.tool_names:  # deskpilot doctor's image probe
            image = request.last_image
            if image is None or image.data is None:
                return Reply(content="I cannot see an image in the request.")
            color = color_name(image.data)  # type: ignore[arg-type]
            self.log.append({"step": "report_color", "color": color})
            return Reply(tool_calls=[tool_call("report_color", {"color": color})], style=self.style)
        step_index = request.assistant_turns
        step = self.steps[step_index] if step_index < len(self.steps) else "done"
        thought = f"<think>step {step_index + 1}: {step}</think>\n" if self.think else None
        if step == "done":
            self.log.append({"step": step})
            return Reply(content=(thought or "") + self.final)
        args: dict[str, Any]
        if step in ("click", "move"):
            where, why = self._locate(request)
            self.log.append({"step": step, "found": where, "why": why})
            if where is None:
                return Reply(content=f"I cannot find the {self.label}: {why}.")
            if step == "click":
                args = {"label": self.label, "box": where[self.box_format]}
            else:
                args = {"x": where["point"][0], "y": where["point"][1]}
        elif step == "type":
            args = {"text": self.text}
            self.log.append({"step": step})
        elif step == "key":
            args = {"key": self.key}
            self.log.append({"step": step})
        else:
            args = {}
            self.log.append({"step": step})
        return Reply(content=thought, tool_calls=[tool_call(self.tools[step], args)], style=self.style)
