import deskpilot
from deskpilot import errors


def test_all_is_sorted_and_resolvable() -> None:
    assert list(deskpilot.__all__) == sorted(deskpilot.__all__)
    assert list(errors.__all__) == sorted(errors.__all__)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.DeskpilotError)


def test_errors_carry_details() -> None:
    exc = errors.ModelHTTPError("bad gateway", status=502, url="http://x")
    assert exc.status == 502
    assert exc.details == {"status": 502, "url": "http://x"}
    key = errors.UnknownKeyError("ctlr", ["ctrl"])
    assert "did you mean 'ctrl'" in str(key)
    assert isinstance(key, ValueError)
