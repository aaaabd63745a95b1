"""The ``transcription`` row of ``fermix doctor``: the configured backend and whether its
credential is present.

Offline: the key is resolved the way the daemon resolves it (own slot, else the reused
chat-provider key) but no service is called, so a missing or unresolvable key shows up
before a voice note arrives; a key the service would reject does not.
"""

from __future__ import annotations

from fermix_core.doctor import CheckResult, DoctorContext, Status

__all__ = ["check_transcription"]

LABEL = "transcription"


def check_transcription(ctx: DoctorContext) -> CheckResult:
    if ctx.config is None:
        return CheckResult(LABEL, Status.SKIP, "config did not load")
    from fermix_core.authfile import AuthStore
    from fermix_core.secrets import SecretResolver
    from fermix_core.transcription.engine import select_backend, setup_command

    config = ctx.config
    resolver = SecretResolver(
        environ=ctx.environ, profile=config.core.fermix_core.profile, host=ctx.host
    )
    selection = select_backend(
        config,
        ctx.registry,
        resolver=resolver,
        environ=ctx.environ,
        auth_store=AuthStore(ctx.home.auth_file),
        host=ctx.host,
    )
    shown = f"{selection.backend} ({selection.model})" if selection.model else selection.backend
    if selection.problem is not None:
        return CheckResult(
            LABEL,
            Status.WARN,
            f"{shown}, not usable (voice notes get a setup hint instead): {selection.problem}",
            fix=f"run `{setup_command(selection.backend)}`",
        )
    detail = f"{shown}, key {selection.key_source}, files up to {selection.max_file_mb} MB"
    if selection.base_url:
        detail += f", at {selection.base_url}"
    if selection.ignored_model:
        return CheckResult(
            LABEL,
            Status.WARN,
            f"{detail}; model {selection.ignored_model!r} is ignored ({selection.backend} is "
            "modelless)",
            fix="run `fermix config unset fermix_core.transcription.model`",
        )
    return CheckResult(LABEL, Status.OK, detail)
