"""Core's own setup steps. Provider, personalization and channel steps come from their plugins."""

from __future__ import annotations

from fermix_core.setup import SetupContext

#: Directories every install needs from the first run; the rest are made on first use.
FIRST_RUN_DIRS = ("workspace", "logs")


def home_step(context: SetupContext) -> None:
    """Create FERMIX_HOME privately and say where things live."""
    home = context.home
    home.ensure()
    for name in FIRST_RUN_DIRS:
        home.ensure_dir(name)
    if context.interactive:
        # Said under the step's header (which would otherwise stand empty) and in the notes.
        context.io.echo(f"Settings, logs and the workspace live in {home.path}")
    context.notes.append(f"Fermix home: {home.path}")
