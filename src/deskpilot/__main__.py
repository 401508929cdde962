import sys

from deskpilot.cli import main

sys.exit(main())
