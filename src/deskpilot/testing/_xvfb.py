"""A private X server (Xvfb) for the demo, the integration tests, the benchmarks and the
Windows tier: the one place that starts one.

The display number comes from Xvfb itself (``-displayfd``: it writes the number to a pipe
once it accepts connections), so parallel sessions never collide and nobody has to poll
for a socket. POSIX only (``pass_fds``).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence

from deskpilot._errors import PlatformError

__all__ = ["AGENT_OPTIONS", "xvfb"]

#: What the agent's runs need of the server: no TCP listener, no reset when the last
#: client leaves (the demo app and the agent connect one after the other), XFIXES for the
#: cursor and damage, XTEST for input.
AGENT_OPTIONS: tuple[str, ...] = (
    "-nolisten", "tcp", "-noreset", "+extension", "XFIXES", "+extension", "XTEST",
)


def _read_display_number(read_fd: int, proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The number Xvfb writes on ``-displayfd``, or "" when it exits, closes the pipe or
    takes longer than ``timeout`` seconds."""
    number = b""
    deadline = time.monotonic() + timeout
    while not number.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            return ""
        ready, _, _ = select.select([read_fd], [], [], min(left, 0.5))
        if not ready:
            continue
        chunk = os.read(read_fd, 16)
        if not chunk:  # Xvfb closed the pipe without a number: it is exiting
            return ""
        number += chunk
    return number.decode("ascii").strip()


@contextlib.contextmanager
def xvfb(
    size: tuple[int, int] = (1920, 1080),
    *,
    depth: int = 24,
    options: Sequence[str] = AGENT_OPTIONS,
    timeout: float = 15.0,
    set_display: bool = True,
) -> Iterator[str]:
    """Start Xvfb with one screen of ``size`` at ``depth`` bits and ``options``; yield its
    DISPLAY (``":N"``) once it accepts connections; stop it after the block.

    ``set_display``: point ``os.environ["DISPLAY"]`` at it for the block (restored after).
    Raises :class:`~deskpilot.PlatformError` when Xvfb is not installed or does not start
    within ``timeout`` seconds.
    """
    if shutil.which("Xvfb") is None:
        raise PlatformError("Xvfb is not installed: install it (apt-get install xvfb)", program="Xvfb")
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", f"{size[0]}x{size[1]}x{depth}", *options],
            pass_fds=(write_fd,),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        # Only Xvfb may hold the write end: its exit must close the pipe (EOF, not a hang).
        os.close(write_fd)
    try:
        try:
            number = _read_display_number(read_fd, proc, timeout)
        finally:
            os.close(read_fd)
        if not number:
            raise PlatformError(f"Xvfb did not start within {timeout:g} s", program="Xvfb")
        display = f":{number}"
        old = os.environ.get("DISPLAY")
        if set_display:
            os.environ["DISPLAY"] = display
        try:
            yield display
        finally:
            if set_display:
                if old is None:
                    os.environ.pop("DISPLAY", None)
                else:
                    os.environ["DISPLAY"] = old
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
