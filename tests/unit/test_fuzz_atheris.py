"""Coverage-guided fuzzing with atheris (libFuzzer) when it is installed.

Each target runs in a child process for a bounded number of inputs (``ATHERIS_RUNS``,
default 4000) with the deskpilot modules instrumented. A target fails on any exception
that is not the parser's typed answer; libFuzzer then prints the crashing input.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("atheris")

RUNS = int(os.environ.get("ATHERIS_RUNS", "4000"))

HARNESS = textwrap.dedent(
    '''
    import sys
    import atheris

    with atheris.instrument_imports(include=["deskpilot"]):
        import orjson
        from deskpilot._errors import InvalidBoxError
        from deskpilot._untrusted import terminal_text, token_count
        from deskpilot.rundir._writer import dumps_json
        from deskpilot.agent.client._sse import SSEDecoder, StreamAssembler
        from deskpilot.agent.client._toolcalls import parse_arguments, parse_message_tool_calls, split_content_tool_calls
        from deskpilot.agent.modes.stateless._protocol import parse_vlm_output
        from deskpilot.geometry import parse_box
        from deskpilot.safety import ActionRequest, Policy, find_secrets, redact, redact_text

    POLICY = Policy.default(prompt=lambda q: False)
    ids = iter(range(10**12))
    new_id = lambda: f"c{next(ids)}"


    def text_of(data):
        return atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(len(data))


    def stateless(data):
        out = parse_vlm_output(text_of(data))
        assert all(r.reason for r in out.rejected)
        dumps_json(out.as_record())


    CONTROLS = frozenset(chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (9, 10))


    def model_output(data):
        # Raw bytes as the model may write them, surrogates included (issue 14).
        text = data.decode("utf-16-le", "surrogatepass") if len(data) % 2 == 0 else data.decode("latin-1")
        shown = terminal_text(text)
        assert not CONTROLS.intersection(shown)
        shown.encode("utf-8")
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            value = text
        assert token_count(value) >= 0
        out = parse_vlm_output(text)
        dumps_json(out.as_record())


    def toolcalls(data):
        text = text_of(data)
        split_content_tool_calls(text, new_id=new_id)
        args, raw, err, msg = parse_arguments(text)
        assert (err is None) == (args is not None)
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if isinstance(value, list):
            for call in parse_message_tool_calls(value, new_id=new_id):
                assert call.error in (None, "invalid_json", "invalid_args")


    def box(data):
        try:
            parse_box(text_of(data))
        except InvalidBoxError as exc:
            assert exc.kind in ("missing_box", "invalid_box")


    def sse(data):
        fdp = atheris.FuzzedDataProvider(data)
        decoder, assembler = SSEDecoder(), StreamAssembler(new_id=new_id)
        while fdp.remaining_bytes():
            for event in decoder.feed(fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 64))):
                assembler.feed(event)
        for event in decoder.close():
            assembler.feed(event)
        assembler.finish()


    def safety(data):
        text = text_of(data)
        once = redact_text(text)
        assert redact_text(once) == once
        decision = POLICY.check(ActionRequest("type_text", keys=(text[:12],), text=text))
        assert decision.rule and decision.reason
        redact({"text": text, "args": {"text": text}, "type": "type"}, mask_typed_text=True)
        find_secrets(text)


    TARGETS = {"stateless": stateless, "toolcalls": toolcalls, "box": box, "sse": sse, "safety": safety,
               "model_output": model_output}
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()
    '''
)


@pytest.mark.parametrize("target", ["stateless", "toolcalls", "box", "sse", "safety", "model_output"])
def test_atheris_finds_no_crash(tmp_path: Path, target: str) -> None:
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS)
    proc = subprocess.run(
        [sys.executable, str(harness), target, f"-runs={RUNS}", "-max_len=512", "-seed=1",
         f"-artifact_prefix={tmp_path}/"],
        capture_output=True, text=True, timeout=280, cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    done = re.search(r"Done (\d+) runs", out)
    assert done is not None, out[-2000:]
    print(f"\natheris {target}: {done.group(1)} runs, 0 crashes")
