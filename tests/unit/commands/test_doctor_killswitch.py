"""`deskpilot doctor` says what stops a run on wlroots (no display needed; the doctor run on
a real sway is in tests/integration/test_sway_outputs.py)."""

from __future__ import annotations

from deskpilot.agent import load_config
from deskpilot.commands.doctor import _killswitch_check


def _config(capture: str, input_backend: str) -> object:
    return load_config(flags={"screen.capture_backend": capture, "screen.input_backend": input_backend},
                       env={}, search_default=False)


def test_wlroots_gets_a_warning_naming_what_stops_a_run() -> None:
    for capture, hands in (("wlroots", "wlroots"), ("auto", "wlroots"), ("wlroots", "auto")):
        check = _killswitch_check(_config(capture, hands))
        assert check is not None and check.status == "WARN"
        assert "corner and the stop hotkey are not watched" in check.detail
        assert "Ctrl+C or SIGTERM" in check.detail and "budgets" in check.detail


def test_elsewhere_the_kill_switch_speaks_for_itself() -> None:
    assert _killswitch_check(_config("auto", "auto")) is None
    assert _killswitch_check(_config("mss", "xtest")) is None
