"""The keyboard as it really is, on Xvfb with real XTest input into the Tk target app:
a controller SIGKILLed while holding keys, buttons and borrowed keycodes; two
controllers in two processes; CapsLock/NumLock/Shift lock on; a layout switched
under an open controller. Every text assertion is on what the app received."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from apps.harness import TargetApp, keys_and_buttons_down

from deskpilot.input import InputController
from deskpilot.input._xtest import XTestBackend

pytestmark = pytest.mark.x11

#: Characters no key of Xvfb's US keymap types: each needs a spare keycode.
MANY = "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓ世界✓€"


def every_spare(spares: list[int]) -> str:
    """A text that borrows every spare keycode exactly once (no remap, so a child with
    a long remap guard never waits)."""
    assert len(spares) <= len(MANY)
    return MANY[: len(spares)]


#: A second process with its own controller, driven line by line on stdin: each line is
#: a JSON command, each answer one JSON line ({"ok": ...} or {"error": ...}).
CHILD = textwrap.dedent(
    """
    import json, sys
    from deskpilot.input import InputController
    from deskpilot.input._xtest import XTestBackend

    guard = float(sys.argv[1])
    ctl = InputController(XTestBackend(remap_guard=guard))
    holds = []
    print(json.dumps({"ok": "ready"}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["do"] == "type":
                ctl.type_text(cmd["text"])
            elif cmd["do"] == "hold":
                hold = ctl.hold(cmd["key"])
                hold.__enter__()
                holds.append(hold)
            elif cmd["do"] == "down":
                ctl.mouse_down(cmd["button"])
            elif cmd["do"] == "close":
                ctl.close()
            ctl.sync() if cmd["do"] != "close" else None
            backend = ctl.backend
            borrowed = getattr(backend, "_mine", getattr(backend, "_spare", {}))  # kc -> keysym
            print(json.dumps({"ok": sorted(kc for kc, sym in borrowed.items() if sym)}), flush=True)
        except Exception as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    """
)


class Child:
    """A controller in another process (see CHILD)."""

    def __init__(self, guard: float = 0.15) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(guard)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        assert self._answer() == "ready"

    def _answer(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the child controller died"
        answer = json.loads(line)
        assert "error" not in answer, answer["error"]
        return answer["ok"]

    def do(self, **cmd: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def child(xvfb: str) -> Iterator[type[Child]]:
    started: list[Child] = []

    class Tracked(Child):
        def __init__(self, guard: float = 0.15) -> None:
            super().__init__(guard)
            started.append(self)

    try:
        yield Tracked
    finally:
        for c in started:
            c.close()


def spare_keycodes() -> list[int]:
    """Keycodes with no keysym in the server's keymap now (read by a fresh controller)."""
    probe = XTestBackend()
    try:
        return sorted(kc for kc, syms in probe._read_keymap().items() if not any(syms))
    finally:
        probe.close()


def locked_modifiers() -> int:
    """The keyboard's locked modifier mask (CapsLock 2, NumLock 16 on Xvfb's keymap),
    read over a connection of its own (XkbGetState; locked_mods is byte 9 of XkbStateRec)."""
    x = ctypes.CDLL("libX11.so.6")
    x.XOpenDisplay.restype = ctypes.c_void_p
    display = ctypes.c_void_p(x.XOpenDisplay(None))
    try:
        state = (ctypes.c_ubyte * 32)()
        assert x.XkbGetState(display, ctypes.c_uint(0x100), state) == 0
        return int(state[9])
    finally:
        x.XCloseDisplay(display)


def type_into(app: TargetApp, ctl: InputController, text: str, widget: str = "entry") -> str:
    app.clear()
    app.focus(widget)
    mark = app.mark()
    ctl.type_text(text)
    try:
        record = app.wait_for(
            lambda r: r["type"] == widget and r["text"] == text, since=mark, timeout=15
        )
    except TimeoutError:
        seen = [r["text"] for r in app.since(mark) if r["type"] == widget]
        return seen[-1] if seen else ""
    return str(record["text"])


# -- a controller killed with SIGKILL ---------------------------------------------------


def kill_a_controller_holding_everything(child: type[Child]) -> None:
    """A second process borrows every spare keycode (a long guard keeps them), holds
    shift and mouse button 1, and is SIGKILLed."""
    victim = child(guard=600.0)
    borrowed = victim.do(do="type", text=every_spare(spare_keycodes()))
    assert borrowed, "the child borrowed no keycode"
    victim.do(do="hold", key="shift")
    victim.do(do="down", button="left")
    down, buttons = keys_and_buttons_down()
    assert down and buttons, "shift and button 1 should be held now"
    victim.kill()


def test_after_a_sigkill_the_next_controller_reclaims_keys_buttons_and_keycodes(
    target_app: TargetApp, child: type[Child]
) -> None:
    spares = spare_keycodes()
    kill_a_controller_holding_everything(child)
    with InputController("xtest") as ctl:  # failed here before: no spare keycode left
        assert keys_and_buttons_down() == ([], 0)
        assert type_into(target_app, ctl, "hello Grüße ✓") == "hello Grüße ✓"
    assert spare_keycodes() == spares
    assert keys_and_buttons_down() == ([], 0)


def test_after_a_sigkill_doctor_finds_working_input(
    target_app: TargetApp, child: type[Child], tmp_path: Path
) -> None:
    spares = spare_keycodes()
    kill_a_controller_holding_everything(child)
    done = subprocess.run(
        [sys.executable, "-m", "deskpilot", "doctor", "--no-model"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    lines = [line for line in done.stdout.splitlines() if "input" in line.lower()]
    assert any("PASS" in line and "xtest" in line for line in lines), done.stdout + done.stderr
    assert keys_and_buttons_down() == ([], 0)
    assert spare_keycodes() == spares


def test_after_a_sigkill_a_run_types_hello(
    target_app: TargetApp, child: type[Child], tmp_path: Path
) -> None:
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

    spares = spare_keycodes()
    kill_a_controller_holding_everything(child)
    target_app.clear()
    target_app.focus("entry")
    mark = target_app.mark()
    script: list[Reply | str] = [Reply(tool_calls=[("type_text", {"text": "hello"})]), "Done."]
    with ModelServer(ScriptedPolicy(script)) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "deskpilot",
                "run",
                "--endpoint",
                server.endpoint,
                "--runs-dir",
                str(tmp_path / "runs"),
                "--image-size",
                "960x540",
                "--quiet",
                "--json",
                "type hello",
            ],
            capture_output=True,
            timeout=120,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert orjson.loads(done.stdout)["outcome"] == "answered"
    target_app.wait_for(
        lambda r: r["type"] == "entry" and r["text"] == "hello", since=mark, timeout=15
    )
    assert keys_and_buttons_down() == ([], 0)
    assert spare_keycodes() == spares


# -- two controllers on one display ------------------------------------------------------


def test_two_controllers_in_two_processes_never_type_wrong_characters(
    target_app: TargetApp, child: type[Child]
) -> None:
    other = child(guard=600.0)  # keeps what it borrows until it closes
    other.do(do="type", text="😀𝔘✓")
    with InputController("xtest") as ctl:
        for _ in range(3):
            assert type_into(target_app, ctl, "äöü and Grüße") == "äöü and Grüße"
            target_app.clear()
            target_app.focus("entry")
            mark = target_app.mark()
            other.do(do="type", text="😀𝔘✓ ü")
            got = target_app.wait_for(
                lambda r: r["type"] == "entry" and len(r["text"]) >= 5, since=mark, timeout=15
            )
            assert got["text"] == "😀𝔘✓ ü"


def test_a_second_controller_starts_and_waits_while_another_holds_every_spare(
    target_app: TargetApp, child: type[Child]
) -> None:
    spares = spare_keycodes()
    other = child(guard=2.0)  # gives its keycodes back 2 s after it last typed
    assert other.do(do="type", text=every_spare(spares)) == spares  # it holds every spare now
    with InputController("xtest") as ctl:  # failed here before: no spare keycode
        assert type_into(target_app, ctl, "plain ascii") == "plain ascii"
        # every spare is the other's: this waits until it gives some back
        assert type_into(target_app, ctl, "Grüße ✓") == "Grüße ✓"
    other.do(do="close")
    assert spare_keycodes() == spares


# -- lock keys and layouts ---------------------------------------------------------------


@pytest.mark.parametrize("lock", ["capslock", "numlock", "capslock+numlock"])
def test_typed_text_is_exact_whatever_the_lock_state(target_app: TargetApp, lock: str) -> None:
    with InputController("xtest") as ctl:
        before = locked_modifiers()
        for key in lock.split("+"):
            ctl.key(key)
        on = locked_modifiers()
        assert on != before
        try:
            for text in ("Hello World", "MiXeD 123 Grüße ÄÖÜ ✓ äöü", "7 * 8 / 9 - 1 + 2.5"):
                assert type_into(target_app, ctl, text) == text
            assert locked_modifiers() == on  # the locks are on again afterwards
        finally:
            for key in lock.split("+"):
                ctl.key(key)
    assert locked_modifiers() == before


def test_typed_text_is_exact_with_a_shift_lock(target_app: TargetApp) -> None:
    subprocess.run(["setxkbmap", "-option", "caps:shiftlock"], check=True, timeout=30)
    try:
        with InputController("xtest") as ctl:
            subprocess.run(["xdotool", "key", "Shift_Lock"], check=True, timeout=10)
            try:
                assert locked_modifiers() & 1  # Shift locked
                for text in ("Hello World 1!", "Grüße ÄÖÜ ✓ äöü"):
                    assert type_into(target_app, ctl, text) == text
                assert locked_modifiers() & 1
            finally:
                subprocess.run(["xdotool", "key", "Shift_Lock"], check=True, timeout=10)
    finally:
        subprocess.run(["setxkbmap", "-option", "", "us"], check=True, timeout=30)
    assert not locked_modifiers() & 1


def test_a_layout_switched_under_an_open_controller(target_app: TargetApp) -> None:
    text = "yz Hello; @#"
    with InputController("xtest") as ctl:
        assert type_into(target_app, ctl, text) == text
        subprocess.run(["setxkbmap", "de"], check=True, timeout=30)
        try:
            for _ in range(3):
                assert type_into(target_app, ctl, text) == text
            assert type_into(target_app, ctl, "äöü ß Grüße") == "äöü ß Grüße"
        finally:
            subprocess.run(["setxkbmap", "us"], check=True, timeout=30)
        assert type_into(target_app, ctl, text) == text  # and back


def lock_group(group: int) -> int:
    """Lock the keyboard's layout group (what a layout switcher does); the locked group
    before, read over a connection of its own (locked_group is byte 1 of XkbStateRec)."""
    x = ctypes.CDLL("libX11.so.6")
    x.XOpenDisplay.restype = ctypes.c_void_p
    display = ctypes.c_void_p(x.XOpenDisplay(None))
    try:
        state = (ctypes.c_ubyte * 32)()
        assert x.XkbGetState(display, ctypes.c_uint(0x100), state) == 0
        x.XkbLockGroup(display, ctypes.c_uint(0x100), ctypes.c_uint(group))
        x.XSync(display, 0)
        return int(state[1])
    finally:
        x.XCloseDisplay(display)


def test_typed_text_is_exact_in_a_second_locked_layout_group(target_app: TargetApp) -> None:
    text = "yz Hello; @# Grüße"
    subprocess.run(["setxkbmap", "-layout", "us,de"], check=True, timeout=30)
    try:
        with InputController("xtest") as ctl:
            assert type_into(target_app, ctl, text) == text
            lock_group(1)  # German, as a layout switcher would
            try:
                assert type_into(target_app, ctl, text) == text
                assert lock_group(1) == 1  # still German afterwards
            finally:
                lock_group(0)
    finally:
        subprocess.run(["setxkbmap", "-layout", "us"], check=True, timeout=30)


def remap_from_another_client(keycode: int, keysym: int) -> None:
    """What xdotool does: another connection maps a keycode (0: back to NoSymbol)."""
    x = ctypes.CDLL("libX11.so.6")
    x.XOpenDisplay.restype = ctypes.c_void_p
    display = ctypes.c_void_p(x.XOpenDisplay(None))
    try:
        syms = (ctypes.c_ulong * 2)(keysym, keysym)
        x.XChangeKeyboardMapping(display, keycode, 2, syms, 1)
        x.XSync(display, 0)
    finally:
        x.XCloseDisplay(display)


def test_a_borrowed_keycode_remapped_by_another_client_is_not_trusted(
    target_app: TargetApp,
) -> None:
    backend = XTestBackend(remap_guard=5.0)  # keeps what it borrowed for the whole test
    keycode = 0
    try:
        with InputController(backend) as ctl:
            assert type_into(target_app, ctl, "ä✓") == "ä✓"
            keycode = backend._by_keysym[0xE4]
            remap_from_another_client(keycode, 0x01002603)  # a snowman on our 'ä' keycode
            ctl.sync()
            assert type_into(target_app, ctl, "ä✓ä") == "ä✓ä"
    finally:
        if keycode:
            remap_from_another_client(keycode, 0)  # the keymap as the other tests expect it


def _watchdogs_of(pid: int) -> list[int]:
    """The input watchdog processes (:mod:`deskpilot._x11._watchdog`) watching ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"deskpilot._x11._watchdog" in argv and b"--parent" in argv and str(pid).encode() in argv:
            found.append(int(entry.name))
    return found


def test_a_run_sigkilled_with_its_watchdog_while_holding_shift_is_cleaned_up_by_the_next_controller(
    target_app: TargetApp, tmp_path: Path
) -> None:
    """The last line of defence: the run AND its watchdog are SIGKILLed (the OOM killer can
    take both; a run killed in its watchdog's first moments has none yet), so nothing
    releases Shift until the next controller reads the held-input record and reclaims it.
    (A run killed alone is released by its watchdog: tests/integration/test_input_watchdog_x11.py.)"""
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

    script: list[Reply | str] = [
        Reply(tool_calls=[("hold_key", {"key": "shift", "seconds": 5})]),
        "Done.",
    ]
    target_app.focus("entry")
    mark = target_app.mark()
    with ModelServer(ScriptedPolicy(script)) as server:
        cmd = [
            sys.executable,
            "-m",
            "deskpilot",
            "run",
            "--endpoint",
            server.endpoint,
            "--toolset",
            "extended",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--image-size",
            "960x540",
            "--quiet",
            "--json",
            "hold shift",
        ]
        log = open(tmp_path / "run.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=tmp_path)
        try:
            try:
                target_app.wait_for(
                    lambda r: r["type"] == "key" and r["keysym"].startswith("Shift"),
                    since=mark,
                    timeout=60,
                )
            except TimeoutError:
                proc.kill()
                raise AssertionError((tmp_path / "run.log").read_text(errors="replace")) from None
            assert keys_and_buttons_down()[0], "shift should be held now"
            watchdogs = _watchdogs_of(proc.pid)
            assert watchdogs, "the run holds input, so its watchdog runs"
            for pid in watchdogs:
                os.kill(pid, signal.SIGKILL)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    time.sleep(1.0)  # twice the watchdog's promise: had one survived, it would have released by now
    assert keys_and_buttons_down()[0], "a SIGKILLed run and watchdog cannot release anything themselves"
    with InputController("xtest"):  # the next controller (a run, doctor) reclaims it
        assert keys_and_buttons_down() == ([], 0)
