"""The system prompt: shipped templates, seeding them into FERMIX_HOME, and composing.

See ``docs/prompt.md`` for the file layout, the seeding and drift rules and the order the
prompt is composed in.
"""

from __future__ import annotations

from fermix_core.prompt.bootstrap import (
    SEED_RECORD,
    VARIABLE_FREE_TEMPLATES,
    SeedRecordError,
    SeedReport,
    prompt_files,
    prompt_files_written,
    reconcile_agent_name,
    render_template,
    seed_bootstrap,
    shipped_template,
    template_drift,
)
from fermix_core.prompt.compose import PromptComposer, date_line

__all__ = [
    "SEED_RECORD",
    "VARIABLE_FREE_TEMPLATES",
    "PromptComposer",
    "SeedRecordError",
    "SeedReport",
    "date_line",
    "prompt_files",
    "prompt_files_written",
    "reconcile_agent_name",
    "render_template",
    "seed_bootstrap",
    "shipped_template",
    "template_drift",
]
