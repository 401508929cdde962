"""The commands users run: `deskpilot demo` (starting its own Xvfb), `doctor`, `run --dry-run`."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from deskpilot.agent import iter_turns, validate_run_dir
from deskpilot.commands.doctor import PROBE_COLORS, _model_checks, image_check
from deskpilot.testing import ModelServer, PixelPolicy, Reply, ScriptedPolicy
from deskpilot.testing._examples import EXAMPLES, example_items

pytestmark = pytest.mark.x11


def deskpilot(*args: str, env: dict[str, str] | None = None, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deskpilot", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def test_demo_command_starts_its_own_display(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = deskpilot("demo", "--runs-dir", str(tmp_path / "runs"), "--image-size", "960x540", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "started a virtual display (Xvfb)" in out
    for line in ("PASS target clicked within its bounds", "PASS text typed exactly", "PASS Enter received"):
        assert line in out
    assert "outcome: answered" in out and "overhead" in out and "p95" in out
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and validate_run_dir(runs[0]) == []
    # Four screenshots when the app repaints within the settle's quiet interval after each
    # action; on a loaded machine Tk can draw the typed text later and the turn's frame is the
    # previous one ("No new screenshot"), three then. The line must name what the run saved.
    shots = orjson.loads((runs[0] / "summary.json").read_bytes())["screenshots"]
    assert len(shots) in (3, 4)
    assert f"screenshots ({len(shots)}): {runs[0]}" in out.replace("\n", "")


def test_demo_all_runs_every_mode_with_its_own_protocol(xvfb: str, tmp_path: Path) -> None:
    """`deskpilot demo --all`: single, team (both variants) and stateless each work the app,
    each driven by a built-in pixel-reading model speaking that mode's protocol."""
    proc = deskpilot("demo", "--all", "--runs-dir", str(tmp_path / "runs"), "--image-size", "960x540",
                     cwd=tmp_path, timeout=400)
    out = proc.stdout.replace("\n", " ")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for title in ("single mode", "team mode, planner/executor", "team mode, commander/operator", "stateless mode"):
        assert f"PASS {title}: outcome answered, 4/4 checks" in out, out
        assert f"what the demo app received ({title})" in out
    assert out.count("PASS text typed exactly") == 4
    assert proc.stdout.count("model: the built-in test server") == 4  # one model line per run
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 4 and all(validate_run_dir(r) == [] for r in runs)
    summaries = [orjson.loads((r / "summary.json").read_bytes()) for r in runs]
    assert [s["mode"] for s in summaries] == ["single", "team", "team", "stateless"]
    assert [s["team"]["variant"] for s in summaries[1:3]] == ["003", "002"]
    # each variant's own tool names, planner first
    for run, plan, click in ((runs[1], "update_execution_plan", "click_screen_element"), (runs[2], "spawn_operator", "click_element")):
        turns = [t for t in iter_turns(run) if t.get("tool_call")]
        names = [t["tool_call"]["name"] for t in turns]
        assert names[0] == plan and click in names, names
    # stateless: one turn with a box and three actions
    acting = [t for t in iter_turns(runs[3]) if t.get("stage") == "turn" and t.get("actions")]
    assert [a["physical"]["kind"] for a in acting[0]["actions"]] == ["click", "type", "key"]


def test_demo_rejects_all_with_a_mode(tmp_path: Path) -> None:
    proc = deskpilot("demo", "--all", "--mode", "team", cwd=tmp_path, timeout=60)
    assert proc.returncode != 0 and "--all runs every mode" in proc.stderr


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_every_shipped_example_script_drives_the_demo(name: str, xvfb: str, tmp_path: Path) -> None:
    """What the examples README tells a user to do: `deskpilot testserver --example NAME` in one
    terminal, `deskpilot demo <flags> --endpoint URL` in another; the app receives it all."""
    server = subprocess.Popen([sys.executable, "-m", "deskpilot", "testserver", "--example", name],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        endpoint = re.search(r"(http://127\.0\.0\.1:\d+/v1/chat/completions)", first)
        assert endpoint, first + server.stderr.read() if server.stderr else first
        flags = EXAMPLES[name].demo_flags.split()
        proc = deskpilot("demo", *flags, "--endpoint", endpoint.group(1), "--runs-dir", str(tmp_path / "runs"),
                         "--image-size", "960x540", cwd=tmp_path)
    finally:
        server.terminate()
        log, errors = server.communicate(timeout=10)
    assert proc.returncode == 0, proc.stdout + proc.stderr + log + errors
    for line in ("PASS target clicked within its bounds", "PASS text typed exactly", "PASS Enter received"):
        assert line in proc.stdout
    assert "outcome: answered" in proc.stdout and "problem:" not in errors, errors
    # every scripted answer was asked for, and nothing more
    assert len(example_items(name)) == log.count("\n#") + log.startswith("#"), log


@pytest.mark.parametrize(
    ("policy", "flags"),
    [
        ("team", ["--mode", "team", "--variant", "commander"]),
        ("stateless", ["--mode", "stateless"]),
        # the default server answers each mode in its own protocol (the issue: `run --mode team`
        # against it ended no_plan, `--mode stateless` ran 10 turns doing nothing)
        ("auto", ["--mode", "team"]),
        ("auto", ["--mode", "team", "--variant", "commander/operator"]),
        ("auto", ["--mode", "stateless"]),
        ("auto", ["--mode", "single"]),
    ],
)
def test_testserver_pixel_policies_of_each_mode(policy: str, flags: list[str], xvfb: str, tmp_path: Path) -> None:
    chosen = [] if policy == "auto" else ["--policy", policy]
    server = subprocess.Popen([sys.executable, "-m", "deskpilot", "testserver", *chosen,
                               "--target", "255,0,255", "--text", "Grüße, 世界! ✓ deskpilot"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert server.stdout is not None
        endpoint = re.search(r"(http://127\.0\.0\.1:\d+/v1/chat/completions)", server.stdout.readline())
        assert endpoint
        proc = deskpilot("demo", *flags, "--endpoint", endpoint.group(1), "--runs-dir", str(tmp_path / "runs"),
                         "--image-size", "960x540", cwd=tmp_path)
    finally:
        server.terminate()
        server.communicate(timeout=10)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS text typed exactly" in proc.stdout and "outcome: answered" in proc.stdout


def test_demo_with_an_endpoint_uses_that_server(xvfb: str, tmp_path: Path) -> None:
    """`deskpilot demo --endpoint URL` (the LM Studio path) talks to the given server only."""
    from deskpilot.agent._scenarios import DEMO_TEXT
    from deskpilot.testing import PixelPolicy
    from deskpilot.testing._demo_app import TARGET_RGB

    policy = PixelPolicy(TARGET_RGB, label="TARGET", text=DEMO_TEXT, steps=("click", "type", "key", "done"))
    with ModelServer(policy) as server:
        proc = deskpilot("demo", "--endpoint", server.endpoint, "--runs-dir", str(tmp_path / "runs"),
                         "--image-size", "960x540", cwd=tmp_path)
        assert len(server.requests) == 4 and server.problems == []
        assert "TARGET" in server.requests[0].messages[1]["content"]  # the demo scenario's task
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "built-in test server" not in proc.stdout and "PASS text typed exactly" in proc.stdout


def test_doctor_passes_against_a_working_setup(xvfb: str, tmp_path: Path) -> None:
    policy = PixelPolicy()  # the built-in pixel server: it names the probe image's colour
    with ModelServer(policy, model="qwen3-vl-8b-instruct") as server:
        proc = deskpilot("doctor", "--endpoint", server.endpoint, cwd=tmp_path, timeout=120)
        request = server.requests[-1]
    out = proc.stdout
    for name in ("display", "capture", "input", "endpoint", "model", "tools"):
        assert any(line.split()[1:2] == [name] and line.split()[0] in ("PASS", "WARN") for line in out.splitlines()), out
    assert "called report_color" in out
    assert re.search(r"^PASS\s+images\s+the model named the (red|green|blue|yellow) probe image correctly", out, re.M), out
    assert request.image_count == 1 and request.tool_names == ["report_color"]
    assert proc.returncode == 0, out + proc.stderr


def test_doctor_warns_when_the_model_names_the_wrong_colour(xvfb: str, tmp_path: Path) -> None:
    """A server that answers without looking (a text-only model) gets 'model may not see images'."""
    policy = ScriptedPolicy([Reply(tool_calls=[("report_color", {"color": "purple"})])])
    with ModelServer(policy, model="qwen3-vl-8b-instruct") as server:
        proc = deskpilot("doctor", "--endpoint", server.endpoint, cwd=tmp_path, timeout=120)
    out = " ".join(proc.stdout.split())
    assert "WARN images model may not see images: asked for the colour of a" in out, out
    assert "it answered 'purple'" in out and "PASS tools the model called report_color" in out
    assert proc.returncode == 0, out + proc.stderr  # a warning, not a failure
    # ...and not "all checks passed" under a WARN
    assert "all checks passed" not in out and "no check failed, " in out and "read the WARN line" in out


@pytest.mark.parametrize("color", sorted(PROBE_COLORS))
def test_doctor_image_probe_against_the_test_servers(color: str) -> None:
    from deskpilot.agent import load_config

    with ModelServer(PixelPolicy()) as server:
        config = load_config(flags={"model.endpoint": server.endpoint}, env={}, search_default=False)
        checks = {c.name: c for c in asyncio.run(_model_checks(config, probe=color))}
        assert server.problems == []
    assert checks["images"].status == "PASS", checks["images"]
    assert f"the {color} probe image" in checks["images"].detail
    wrong = next(c for c in sorted(PROBE_COLORS) if c != color)
    answers = [Reply(tool_calls=[("report_color", {"color": wrong})]), f"It is {color}, or maybe {wrong}.", "I cannot see images."]
    with ModelServer(ScriptedPolicy(answers)) as server:
        config = load_config(flags={"model.endpoint": server.endpoint}, env={}, search_default=False)
        for _ in answers:
            checks = {c.name: c for c in asyncio.run(_model_checks(config, probe=color))}
            assert checks["images"].status == "WARN" and "model may not see images" in checks["images"].detail


@pytest.mark.parametrize(
    ("answer", "ok"),
    [("red", True), ("Red.", True), ("bright RED", True), ("#e61919", True), ("reddish", False), ("red or blue", False),
     ("blue", False), ("", False)],
)
def test_doctor_image_check_wants_the_probe_colour_only(answer: str, ok: bool) -> None:
    assert (image_check("red", answer, 1.0).status == "PASS") is ok


def test_doctor_reports_a_missing_server(xvfb: str, tmp_path: Path) -> None:
    proc = deskpilot("doctor", "--endpoint", "http://127.0.0.1:9/v1/chat/completions", cwd=tmp_path, timeout=120)
    assert proc.returncode == 1
    assert "FAIL endpoint" in " ".join(proc.stdout.split()) and "is LM Studio" in proc.stdout


def test_run_dry_run_json(xvfb: str, tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("click_element", {"label": "centre", "box": [500, 500]})]), "<think>ok</think>Finished."]
    with ModelServer(ScriptedPolicy(script)) as server:
        proc = deskpilot("run", "--endpoint", server.endpoint, "--dry-run", "--json", "--runs-dir", str(tmp_path / "runs"),
                         "--image-size", "640x360", "Click the centre", cwd=tmp_path)
        assert server.problems == []
    assert proc.returncode == 0, proc.stderr
    summary = orjson.loads(proc.stdout)
    assert summary["outcome"] == "answered" and summary["answer"] == "Finished."
    turns = list(iter_turns(summary["run_dir"]))
    assert turns[1]["action"] == {"kind": "click", "x": 960, "y": 540, "button": "left", "count": 1, "label": "centre"}
    run_info = orjson.loads((Path(summary["run_dir"]) / "run.json").read_bytes())
    assert run_info["config"]["agent"]["dry_run"] is True
    assert run_info["config_sources"]["agent.dry_run"] == "flag agent.dry_run"


def test_run_reports_bad_configuration(tmp_path: Path) -> None:
    proc = deskpilot("run", "--dry-run", "x", env={**os.environ, "LMSTUDIO_TIMEOUT": "soon"}, cwd=tmp_path, timeout=60)
    assert proc.returncode == 1
    assert "LMSTUDIO_TIMEOUT" in proc.stderr and "Traceback" not in proc.stderr
    proc = deskpilot("run", "seed001:9", cwd=tmp_path, timeout=60)
    assert proc.returncode == 1 and "no scenario 9 in seed001" in proc.stderr
