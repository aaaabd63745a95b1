"""Registers what the providers package adds outside the providers themselves.

``fermix auth`` (subscription logins) and the ``provider`` step of ``fermix setup``. Both are
named by import path or added lazily, so loading this plugin costs no adapter import.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import SetupOption, SetupStepSpec

PROVIDER_STEP = SetupStepSpec(
    name="provider",
    label="Model provider",
    run="fermix_providers.setup_step:provider_step",
    order=100,
    options=(
        SetupOption(flag="--provider", help="Provider to configure and make primary."),
        SetupOption(flag="--api-key", help="API key for that provider.", secret=True),
        SetupOption(
            flag="--api-key-env",
            help="Read the API key from this environment variable at run time instead.",
        ),
        SetupOption(
            flag="--api-key-command",
            help='Get the API key from a helper command, e.g. "pass show fermix/openai".',
        ),
        SetupOption(
            flag="--auth-mode",
            help="anthropic/xai: api_key, or oauth for a subscription login (`fermix auth login`).",
        ),
        SetupOption(flag="--model", help="Default model id."),
        SetupOption(flag="--base-url", help="API base URL (Ollama server, gateway)."),
        SetupOption(
            flag="--reasoning-effort",
            help="Reasoning effort (effort-capable providers; levels the model accepts).",
        ),
    ),
)


@hookimpl
def fermix_cli(app: Any) -> None:
    from fermix_providers.cli_auth import app as auth_app

    app.add_typer(auth_app, name="auth")


@hookimpl
def fermix_setup_steps() -> Iterable[SetupStepSpec]:
    return (PROVIDER_STEP,)
