"""A faithful re-creation of seed 000's agent loop, as the turn-latency baseline.

Seed 000 (``../shared/seeds/000_*.txt``) is stdlib-only and Windows-only. This is its
loop with the same costs, on Linux:

* HTTP: ``urllib.request`` POST of ``json.dumps(payload)`` -- the whole conversation,
  base64 images included, re-serialized every turn; no keep-alive.
* Screenshot: the seed's GDI ``StretchBlt`` (native) is stood in for by an mss grab plus
  Pillow's native BOX resize; then, as in the seed, BGRA -> RGB and the PNG scanlines in
  a per-pixel Python loop, ``zlib.compress(level=6)``, chunks with ``zlib.crc32``.
* Input: the seed's SendInput calls, here deskpilot's InputController (XTest), with the
  seed's fixed delays around actions (80 ms after the move, 120 ms after the click).
* Pacing: ``time.sleep(step_delay)`` (0.4 s) after every step; the screenshot only after
  an explicit ``observe_screen`` call; screenshot and think pruning as the seed does it.

Only instrumentation was added: the time each model reply was parsed and each next
request was handed to urllib, so the client-side turn overhead can be compared with
deskpilot's in the same run (``benchmarks/bench_turn.py``).
"""

from baselines_seed000.agent import BaselineResult, run_baseline_agent

__all__ = ["BaselineResult", "run_baseline_agent"]
