"""``python -m deskpilot.eval SPEC.json RESULT.json``: one session (what the local engine runs);
``python -m deskpilot.eval --fork-server``: the engine's fork server."""

import sys

if sys.argv[1:] == ["--fork-server"]:
    from deskpilot.eval._forkserver import serve

    sys.exit(serve())

from deskpilot.eval._session import main

sys.exit(main())
