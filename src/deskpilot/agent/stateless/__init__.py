"""The stateless mode (seed 004): JSON replies, several actions per turn, annotated screenshots.

The model keeps no conversation: every request is the system prompt, the model's own last
``observation`` (its story) and one screenshot on which the engine has drawn what the
model did (orange action heat with a fading trail, blue boxes it asked for, labels).
"""

from deskpilot.agent.stateless._protocol import (
    ACTION_NAMES,
    Action,
    BBox,
    Rejection,
    VlmOutput,
    parse_vlm_output,
)

__all__ = [
    "ACTION_NAMES",
    "Action",
    "BBox",
    "Rejection",
    "VlmOutput",
    "parse_vlm_output",
]
