"""`deskpilot shot` argument parsing (no display needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from deskpilot._errors import ConfigError
from deskpilot.cli import build_parser, main
from deskpilot.commands.shot import parse_region, parse_size


def test_size_and_region_syntax() -> None:
    assert parse_size("1536x864") == (1536, 864)
    assert parse_size("1024X576") == (1024, 576)
    assert parse_region("0,0,1280,720") == (0, 0, 1280, 720)
    assert parse_region(" 10, 20, 30, 40") == (10, 20, 30, 40)
    for bad in ("1536", "0x10", "axb", "10x-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_size(bad)
    for bad in ("1,2,3", "1,2,0,4", "-1,0,5,5", "a,b,c,d"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_region(bad)


def test_shot_is_a_registered_subcommand() -> None:
    args = build_parser().parse_args(["shot", "--size", "1536x864", "--repeat", "5", "--no-cursor", "--level", "6"])
    assert (args.size, args.repeat, args.cursor, args.level, args.out) == ((1536, 864), 5, False, 6, None)
    assert args.scaling == "native"
    assert build_parser().parse_args(["shot", "--backend", "gdi", "--scaling", "gdi"]).scaling == "gdi"


def test_shot_and_run_name_the_capture_backend_alike() -> None:
    # One name per concept: `run --capture` and `shot --capture`; `shot --backend` stays as an alias.
    parser = build_parser()
    assert parser.parse_args(["shot", "--capture", "mss"]).backend == "mss"
    assert parser.parse_args(["shot", "--backend", "mss"]).backend == "mss"
    assert parser.parse_args(["run", "--capture", "mss", "x"]).capture_backend == "mss"


def test_shot_default_output_is_a_new_file_in_the_temp_directory(tmp_path: Path) -> None:
    import tempfile

    from deskpilot.commands.shot import default_out

    first, second = Path(default_out()), Path(default_out())
    try:
        assert first.parent == Path(tempfile.gettempdir()) and first != second
        assert first.name.startswith("deskpilot-shot-") and first.suffix == ".png"
    finally:
        first.unlink()
        second.unlink()


@pytest.mark.parametrize("argv", [["shot", "--size", "12"], ["shot", "--level", "10"], ["shot", "--repeat", "0"], ["shot", "--filter", "lzw"], ["shot", "--scaling", "bilinear"]])
def test_bad_flags_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "deskpilot shot: error" in capsys.readouterr().err


def test_gdi_scaling_needs_the_gdi_backend() -> None:
    # refused before any grab, with the reason, whatever the desktop (no display needed)
    from deskpilot.capture import Capturer

    class NoScaleBackend:
        name = "mss"
        closed = False

        def close(self) -> None:
            self.closed = True

    backend = NoScaleBackend()
    with pytest.raises(ConfigError, match="needs the gdi backend"):
        Capturer(backend, scaling="gdi")  # type: ignore[arg-type]
    assert backend.closed
