"""``deskpilot testserver``: a local OpenAI-compatible model server to try the agent without a model.

The default model finds a coloured target in each screenshot it receives and clicks it,
then types and presses a key, in the protocol of the mode that asks (``--policy auto``:
tool calls for the single mode, a planner's plan and executor tool calls of either team
variant, JSON with a box and several actions per turn for the stateless mode; ``--policy
single|team|stateless`` fixes one): what ``deskpilot demo`` uses. ``--script FILE`` plays a JSON list of replies and faults;
``--example NAME`` plays one of the shipped scripts, one per mode and tool set
(``--examples`` lists them; the format and the examples are documented in
``deskpilot/testing/examples/README.md``). Point the agent at the printed endpoint:
``deskpilot demo --endpoint URL`` or ``deskpilot run --endpoint URL "task"``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def _rgb(text: str) -> tuple[int, int, int]:
    value = text.strip().lstrip("#")
    try:
        if "," in value:
            r, g, b = (int(v) for v in value.split(","))
        elif len(value) == 6:
            r, g, b = (int(value[i:i + 2], 16) for i in (0, 2, 4))
        else:
            raise ValueError(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"colour {text!r} is not R,G,B or #RRGGBB") from None
    if not all(0 <= c <= 255 for c in (r, g, b)):
        raise argparse.ArgumentTypeError(f"colour {text!r} has a component outside 0..255")
    return r, g, b


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "testserver",
        help="run a local OpenAI-compatible model server (pixel-reading or scripted)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: a free one, printed)")
    parser.add_argument("--policy", choices=("auto", "single", "pixel", "team", "stateless"), default="auto",
                        help="the pixel-reading model's protocol: auto (default: the mode of each request, so "
                        "every mode works unchanged), single ('pixel' is an alias), team, stateless")
    parser.add_argument("--script", metavar="FILE", help="JSON file: a list of replies/faults to play in order")
    parser.add_argument("--example", metavar="NAME",
                        help="play a shipped example script (one per mode and tool set; --examples lists them)")
    parser.add_argument("--examples", action="store_true", help="list the example scripts and how to run each")
    parser.add_argument("--target", type=_rgb, default=(255, 0, 0), metavar="R,G,B",
                        help="pixel policy: colour of the target (default 255,0,0)")
    parser.add_argument("--done-color", dest="done_rgb", type=_rgb, default=(0, 200, 0), metavar="R,G,B",
                        help="team/stateless policy: the colour that shows the target was clicked (default 0,200,0)")
    parser.add_argument("--label", default="target", help="pixel policy: label sent with click_element")
    parser.add_argument("--text", default="hello", help="pixel policy: text for type_text")
    parser.add_argument("--key", default="enter", help="pixel policy: key for press_key")
    parser.add_argument("--steps", default="click,type,key,done",
                        help="pixel policy: comma-separated steps (click, move, click_mouse, type, key, "
                             "observe, done); seed 001 tools: move,click_mouse,type,done")
    parser.add_argument("--box-format", choices=("point", "bbox"), default="point")
    parser.add_argument("--model", default=None, help="the one model id to serve (default: accept any)")
    parser.add_argument("--latency", type=float, default=0.0, help="simulated model seconds per answer")
    parser.add_argument("--allow-invalid", action="store_true",
                        help="answer invalid requests anyway (problems are still printed)")
    parser.add_argument("--quiet", action="store_true", help="do not print one line per request")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import orjson

    from deskpilot._errors import ConfigError
    from deskpilot.testing import (
        EXAMPLES,
        ModelServer,
        RecordedRequest,
        ScriptedPolicy,
        example_items,
        example_path,
        reply_from_json,
        serve,
    )

    if args.examples:
        print("Example scripts (deskpilot testserver --example NAME), each driving `deskpilot demo`:\n")
        for example in EXAMPLES.values():
            print(f"  {example.name}\n      {example.what}\n      then: deskpilot demo {example.demo_flags} "
                  f"--endpoint URL\n      file: {example_path(example.name)}")
        print("\nFormat, tools of every mode and these examples: src/deskpilot/testing/examples/README.md in the repository")
        return 0
    if args.script and args.example:
        raise ConfigError("give --script FILE or --example NAME, not both", where="--example")
    policy: Any
    if args.example:
        policy = ScriptedPolicy([reply_from_json(item) for item in example_items(args.example)])
    elif args.script:
        try:
            with open(args.script, "rb") as fh:
                items = orjson.loads(fh.read())
            if not isinstance(items, list):
                raise ValueError("the script must be a JSON list")
            policy = ScriptedPolicy([reply_from_json(item) for item in items])
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(f"cannot use script {args.script}: {exc}") from exc
    elif args.policy in ("team", "stateless", "auto"):
        from deskpilot.testing import AutoPolicy, StatelessPolicy, TeamPolicy

        team = TeamPolicy(args.target, done_rgb=args.done_rgb, label=args.label, text=args.text, key=args.key)
        stateless = StatelessPolicy(args.target, done_rgb=args.done_rgb, label=args.label, text=args.text,
                                    key=args.key)
        if args.policy == "team":
            policy = team
        elif args.policy == "stateless":
            policy = stateless
        else:
            policy = AutoPolicy(_pixel_policy(args), team, stateless)
    else:
        policy = _pixel_policy(args)

    def on_ready(server: ModelServer) -> None:
        print(f"deskpilot test server: {server.endpoint}  (models: {server.url}/v1/models; Ctrl+C stops)",
              flush=True)

    def on_request(record: RecordedRequest) -> None:
        if args.quiet:
            return
        reply = record.reply or {}
        calls = [c["function"]["name"] for c in reply.get("tool_calls", [])] if "tool_calls" in reply else []
        what = ",".join(calls) or ("fault " + str(reply["fault"]) if "fault" in reply else "text")
        line = (f"#{record.index} {record.status} msgs={len(record.messages)} images={record.image_count} "
                f"stream={record.stream} -> {what}")
        print(line, flush=True)
        for problem in record.problems:
            print(f"   problem: {problem}", file=sys.stderr, flush=True)

    try:
        serve(policy, args.host, args.port, on_ready=on_ready, model=args.model, latency=args.latency,
              reject_invalid=not args.allow_invalid, on_request=on_request)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    return 0


def _pixel_policy(args: argparse.Namespace) -> Any:
    from deskpilot._errors import ConfigError
    from deskpilot.testing import PixelPolicy

    try:
        return PixelPolicy(args.target, label=args.label, text=args.text, key=args.key,
                           steps=[s.strip() for s in args.steps.split(",") if s.strip()],
                           box_format=args.box_format)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
