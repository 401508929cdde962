"""`deskpilot doctor`'s last line says what the lines above say (no display needed)."""

from __future__ import annotations

from deskpilot.commands.doctor import CheckResult, verdict


def test_all_checks_passed_only_without_warnings() -> None:
    ok = CheckResult("capture", "PASS", "fine")
    warn = CheckResult("images", "WARN", "model may not see images")
    fail = CheckResult("endpoint", "FAIL", "refused")
    skip = CheckResult("model", "SKIP", "--no-model")
    assert verdict([ok, skip]) == "all checks passed"
    assert verdict([ok, warn]) == "no check failed, 1 warning: read the WARN line above"
    assert verdict([warn, warn]) == "no check failed, 2 warnings: read the WARN lines above"
    assert verdict([ok, fail, warn]) == "1 failed, 1 warning"
