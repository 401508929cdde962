"""``python -m deskpilot.eval SPEC.json RESULT.json``: one session (what the local engine runs)."""

import sys

from deskpilot.eval._session import main

sys.exit(main())
