"""Subcommands of the ``deskpilot`` CLI; each module exposes ``register(subparsers)``."""

# Nothing to import from here: the CLI (deskpilot.cli) loads each subcommand module by name.
__all__: list[str] = []
