"""The example scripts ``deskpilot testserver --example NAME`` plays (one per mode and tool set).

Each is a JSON file in ``deskpilot/testing/examples/`` in the ``--script`` format
(:func:`deskpilot.testing.reply_from_json`; ``examples/README.md`` documents both) and
drives the demo app of ``deskpilot demo`` to the end: its coordinates are where the demo
app puts the TARGET and the text field on any screen size (the app places them relative
to the screen).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson

from deskpilot._errors import ConfigError

__all__ = ["EXAMPLES", "Example", "example_items", "example_path"]


@dataclass(frozen=True, slots=True)
class Example:
    name: str
    #: What it shows, in one line.
    what: str
    #: The ``deskpilot demo`` flags that make the agent speak this script's protocol.
    demo_flags: str


EXAMPLES: dict[str, Example] = {
    e.name: e
    for e in (
        Example(
            "single-element",
            "single mode, element tools (seed000): click_element by box, type_text, "
            "press_key, a final answer",
            "--mode single --toolset element",
        ),
        Example(
            "single-pointer",
            "single mode, pointer tools (seed001): take_screenshot, move_mouse, click_mouse, "
            "type_text (a newline is Enter)",
            "--mode single --toolset pointer",
        ),
        Example(
            "single-extended",
            "single mode, extended tools: wait, click_element with a [[x1,y1],[x2,y2]] box, "
            "type_text, press_key",
            "--mode single --toolset extended",
        ),
        Example(
            "single-element-flaky",
            "single mode, element tools, with a 503 and a dropped connection: the "
            "client retries and the run still ends answered",
            "--mode single --toolset element",
        ),
        Example(
            "team-planner-executor",
            "team mode, planner/executor (seed 003): update_execution_plan, "
            "click_screen_element, type_text_input, press_keyboard_key, report_mission_complete",
            "--mode team --variant planner/executor",
        ),
        Example(
            "team-commander-operator",
            "team mode, commander/operator (seed 002): spawn_operator, "
            "click_element, type_text, press_key, the commander's review at turn 5, report_completion",
            "--mode team --variant commander/operator",
        ),
        Example(
            "stateless",
            "stateless mode (seed 004): one JSON answer with a box and click + type + key, "
            "then done",
            "--mode stateless",
        ),
    )
}


def example_path(name: str) -> Any:
    """The shipped file of example ``name`` (an importlib resource)."""
    if name not in EXAMPLES:
        raise ConfigError(
            f"there is no example script {name!r}; examples: {', '.join(EXAMPLES)}",
            where="--example",
        )
    return resources.files("deskpilot.testing").joinpath("examples", f"{name}.json")


def example_items(name: str) -> list[Any]:
    """The JSON items of example ``name`` (for :func:`~deskpilot.testing.reply_from_json`)."""
    items = orjson.loads(example_path(name).read_bytes())
    assert isinstance(items, list)
    return items
