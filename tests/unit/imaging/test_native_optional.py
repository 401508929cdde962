"""An install without the compiled core: one clear warning, the reference kernels, a doctor
line, and DESKPILOT_REQUIRE_NATIVE=1 to make it an error.

Each case runs in a fresh interpreter where the compiled modules cannot be imported
(``sys.modules[name] = None`` makes ``import`` raise the ModuleNotFoundError that a missing
extension raises). The real thing, a pip install whose C build fails, is
tests/integration/test_install_linux.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from deskpilot.errors import DeskpilotError, ReferenceKernelsWarning

IMAGING = "deskpilot._native.imaging"
ANNOTATE = "deskpilot._native.annotate"


def run(
    code: str, *, missing: tuple[str, ...] = (IMAGING, ANNOTATE), **env: str
) -> subprocess.CompletedProcess[str]:
    hide = "".join(f"sys.modules[{name!r}] = None\n" for name in missing)
    script = "import sys\n" + hide + textwrap.dedent(code)
    base = {k: v for k, v in os.environ.items() if not k.startswith("DESKPILOT_")}
    # -W default: show every warning once per location, whatever the caller's filters say
    return subprocess.run(
        [sys.executable, "-W", "default", "-c", script],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


USE_THE_KERNELS = """
import numpy as np
from deskpilot import imaging
from deskpilot.imaging import _overlay
frame = np.zeros((40, 64, 4), np.uint8)
rgb = imaging.prepare(frame, size=(32, 20))
assert imaging.encode_png(rgb).startswith(b"\\x89PNG")
_overlay.annotate(np.zeros((40, 64, 3), np.uint8), [_overlay.ActionMark("click", 500, 500)])
print(imaging.BACKEND, _overlay.OVERLAY_BACKEND)
"""


def test_warning_is_part_of_the_one_tree() -> None:
    assert issubclass(ReferenceKernelsWarning, DeskpilotError)
    assert issubclass(ReferenceKernelsWarning, RuntimeWarning)


def test_a_missing_core_warns_once_and_runs_the_reference() -> None:
    proc = run(USE_THE_KERNELS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["reference", "reference"]
    assert proc.stderr.count("ReferenceKernelsWarning") == 1, proc.stderr
    message = " ".join(proc.stderr.split())
    for part in (
        f"{IMAGING} did not import",
        "numpy reference kernels",
        "slower",  # what it costs
        "binary wheel",  # how to get the fast core...
        "C compiler and the Python headers",  # ...either way
        "DESKPILOT_PURE=1",
    ):
        assert part in message, (part, message)


def test_only_the_annotation_core_missing_warns_once_and_names_it() -> None:
    proc = run(USE_THE_KERNELS, missing=(ANNOTATE,))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["native", "reference"]
    assert proc.stderr.count("ReferenceKernelsWarning") == 1
    assert f"{ANNOTATE} did not import" in proc.stderr


@pytest.mark.parametrize("missing", [(IMAGING, ANNOTATE), (ANNOTATE,)])
def test_require_native_makes_a_missing_core_an_import_error(missing: tuple[str, ...]) -> None:
    proc = run(USE_THE_KERNELS, missing=missing, DESKPILOT_REQUIRE_NATIVE="1")
    assert proc.returncode == 1
    assert (
        f"ImportError: DESKPILOT_REQUIRE_NATIVE=1 but deskpilot's compiled core {missing[0]}"
        in proc.stderr
    )
    assert "ReferenceKernelsWarning" not in proc.stderr


def test_require_native_cli_says_it_without_a_traceback() -> None:
    proc = run(
        "from deskpilot.cli import main\nsys.exit(main(['shot', '--help']))",
        DESKPILOT_REQUIRE_NATIVE="1",
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("deskpilot: error: DESKPILOT_REQUIRE_NATIVE=1 but"), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("require", ["", "1"])
def test_pure_env_is_a_choice_and_stays_silent(require: str) -> None:
    # ./dev test runs every test with DESKPILOT_REQUIRE_NATIVE=1, and tests that force the
    # reference set DESKPILOT_PURE=1 on top: that pair must stay quiet and working.
    proc = run(USE_THE_KERNELS, DESKPILOT_PURE="1", DESKPILOT_REQUIRE_NATIVE=require)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["reference", "reference"]
    assert proc.stderr == ""


def test_an_installed_core_is_used_without_a_word() -> None:
    proc = run(USE_THE_KERNELS, missing=())
    if proc.stdout.split() != ["native", "native"]:
        pytest.skip(
            "compiled core not built here (DESKPILOT_REQUIRE_NATIVE=1 runs make this an error)"
        )
    assert proc.returncode == 0 and proc.stderr == ""


CORE_CHECK = """
from deskpilot.commands.doctor import _core_check
check = _core_check()
print(check.status, check.name, "|", check.detail)
"""


def test_doctor_line_without_the_core_says_reference_and_how_to_fix() -> None:
    proc = run(CORE_CHECK)
    status, detail = proc.stdout.split(" | ", 1)
    assert status == "WARN imaging core"
    assert detail.startswith("reference: deskpilot's compiled core is not installed")
    assert "binary wheel" in detail and "C compiler" in detail


def test_doctor_line_under_pure_names_the_variable() -> None:
    proc = run(CORE_CHECK, DESKPILOT_PURE="1")
    assert proc.stdout.strip() == (
        "WARN imaging core | reference: numpy kernels chosen by DESKPILOT_PURE=1 "
        "(unset it for the compiled core)"
    )


def test_doctor_line_fails_under_require_native() -> None:
    proc = run(CORE_CHECK, DESKPILOT_REQUIRE_NATIVE="1")
    assert proc.stdout.startswith("FAIL imaging core | DESKPILOT_REQUIRE_NATIVE=1 but"), (
        proc.stdout + proc.stderr
    )


def test_doctor_line_with_the_core_says_native() -> None:
    proc = run(CORE_CHECK, missing=())
    if "native" not in proc.stdout:
        pytest.skip("compiled core not built here")
    from deskpilot._version import __version__

    assert proc.stdout.startswith(f"PASS imaging core | native: compiled core {__version__} (")
