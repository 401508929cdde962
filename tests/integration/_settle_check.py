"""Run actions through the agent's real path and hold each settled screenshot against the
app's own final frame.

A scripted model (:class:`deskpilot.testing.ModelServer`) asks for each step, then for a
``wait`` of :data:`FINAL_WAIT_S` (the extended tool set's tool: it sleeps, then the
session settles and captures afresh). The screenshot after the step is the one the
settle chose, the one after the wait is the app once it is certainly done; both go
through the same capture, downscale and PNG, so a finished app gives equal files.
Pixels, not timings, are compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from deskpilot.agent import iter_turns, load_config, run_agent
from deskpilot.geometry import Mapping, Rect
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

__all__ = ["FINAL_WAIT_S", "SIGNALS", "Checked", "Step", "mismatch", "norm", "run_steps"]

#: Longer than any reaction here (the 400 ms transition, a smooth scroll, 120 ms late
#: drawing), with room for a loaded machine.
FINAL_WAIT_S = 2.0
SCREEN = Rect(0, 0, 1920, 1080)
#: What the settle waits on: X11 DAMAGE, and probe polling (Windows, X11 without DAMAGE)
SIGNALS = ("damage", "poll")
IMAGE = (960, 540)


def norm(x: int, y: int) -> list[int]:
    """A screen pixel as the model's 0..1000 point."""
    return list(Mapping(SCREEN, *IMAGE).physical_to_norm(x, y))


@dataclass(frozen=True)
class Step:
    tool: str
    arguments: dict[str, Any]
    #: False for a step whose screenshot is checked only by the caller (no effect expected)
    changes: bool = True

    def __str__(self) -> str:
        return f"{self.tool}({self.arguments})"


@dataclass
class Checked:
    step: Step
    record: dict[str, Any]  # the step's turn record
    before: npt.NDArray[np.uint8]  # the screenshot the model had before the step
    settled: npt.NDArray[np.uint8]  # the screenshot after the step (the settle's choice)
    final: npt.NDArray[np.uint8]  # the screenshot after the wait: the app done

    @property
    def settle(self) -> dict[str, Any]:
        return dict(self.record.get("settle") or {})


def _pixels(run_dir: Path, name: str) -> npt.NDArray[np.uint8]:
    with Image.open(run_dir / name) as img:
        return np.asarray(img.convert("RGB"), dtype=np.uint8)


def run_steps(work: Path, steps: list[Step], *, signal: str = "damage", cursor: bool = False, **flags: Any) -> list[Checked]:
    """Run ``steps`` (each followed by the final wait) through a full agent run with the
    default settle settings (``flags`` override any). ``signal``: what the settle waits on,
    X11 DAMAGE or probe polling (the path of every backend without drawing
    notifications). ``cursor``: draw the pointer into the screenshots (off by default:
    the pointer's shape is set by the app some time after it moves, which is not drawing
    the settle can see)."""
    script: list[Reply | str] = []
    for step in steps:
        script.append(Reply(tool_calls=[(step.tool, step.arguments)]))
        script.append(Reply(tool_calls=[("wait", {"seconds": FINAL_WAIT_S})]))
    script.append("Done.")
    with ModelServer(ScriptedPolicy(script), validate=False) as server:
        cfg = load_config(
            flags={
                "model.endpoint": server.endpoint,
                "run.runs_dir": str(work / "runs"),
                "screen.image_width": IMAGE[0],
                "screen.image_height": IMAGE[1],
                "screen.cursor": cursor,
                "agent.toolset": "extended",
                "agent.max_steps": 2 * len(steps) + 2,
                "agent.settle_signal": signal,
                **flags,
            },
            env={},
            search_default=False,
        )
        result = run_agent(cfg, "settle check", handle_signals=False)
    assert result.outcome == "answered", result.error
    assert result.summary["settle_signal"] == signal, result.summary["settle_signal"]
    turns = list(iter_turns(result.run_dir))
    acted = [i for i, t in enumerate(turns) if (t.get("tool_call") or {}).get("name") not in (None, "wait")]
    assert len(acted) == len(steps), [t.get("tool_call") for t in turns]
    checked = []
    for step, i in zip(steps, acted, strict=True):
        record, waited = turns[i], turns[i + 1]
        assert waited["tool_call"]["name"] == "wait", waited["tool_call"]
        assert record["result"]["ok"] is True, record["result"]
        checked.append(
            Checked(
                step,
                record,
                _pixels(result.run_dir, turns[i - 1]["observation"]["screenshot"]),
                _pixels(result.run_dir, record["observation"]["screenshot"]),
                _pixels(result.run_dir, waited["observation"]["screenshot"]),
            )
        )
    return checked


def _box(diff: npt.NDArray[np.bool_]) -> list[int]:
    ys, xs = np.nonzero(diff)
    return [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]


def mismatch(check: Checked) -> str | None:
    """None when the settled screenshot is the final frame; else what was wrong, for the
    failure message: stale (the frame from before the step) or early (a frame from the
    middle of the reaction), where the pixels differ, and what the settle recorded."""
    if check.step.changes and np.array_equal(check.before, check.final):
        return f"{check.step}: the app showed no change at all (the test drove nothing)"
    differs = np.any(check.settled != check.final, axis=2)
    if not differs.any():
        return None
    kind = "stale (the frame before the step)" if np.array_equal(check.settled, check.before) else "early (mid-reaction)"
    return (
        f"{check.step}: the settled screenshot is {kind}: {int(differs.sum())} pixels differ from the "
        f"final frame in the box {_box(differs)} (image px of {IMAGE}); settle record {check.settle}; "
        f"result {check.record['result']}"
    )
