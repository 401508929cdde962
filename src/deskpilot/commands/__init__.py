"""Subcommands of the ``deskpilot`` CLI; each module exposes ``register(subparsers)``."""
