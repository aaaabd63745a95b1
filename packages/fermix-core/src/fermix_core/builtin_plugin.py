"""Core's own contributions, registered through the same hooks third-party plugins use.

The loader registers this module directly (not through an entry point), so core's doctor
rows and setup steps exist even when ``FERMIX_LOAD_PLUGINS`` is empty.
"""

from __future__ import annotations

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import DoctorCheckSpec, SetupStepSpec


@hookimpl
def fermix_doctor_checks():
    yield DoctorCheckSpec(
        name="config", label="config.toml", check="fermix_core.doctor_checks:check_config", order=10
    )
    yield DoctorCheckSpec(
        name="plugins", label="plugins", check="fermix_core.doctor_checks:check_plugins", order=20
    )
    yield DoctorCheckSpec(
        name="home", label="FERMIX_HOME", check="fermix_core.doctor_checks:check_home", order=30
    )
    yield DoctorCheckSpec(
        name="auth_file",
        label="auth.json",
        check="fermix_core.doctor_checks:check_auth_file",
        order=35,
    )
    yield DoctorCheckSpec(
        name="keyring", label="keyring", check="fermix_core.doctor_checks:check_keyring", order=40
    )
    yield DoctorCheckSpec(
        name="secrets", label="secrets", check="fermix_core.doctor_checks:check_secrets", order=50
    )
    yield DoctorCheckSpec(
        name="sandbox",
        label="sandbox confinement",
        check="fermix_core.doctor_checks:check_sandbox",
        order=55,
    )
    yield DoctorCheckSpec(
        name="providers",
        label="providers",
        check="fermix_core.routing.report:check_routes",
        order=60,
    )
    yield DoctorCheckSpec(
        name="bootstrap",
        label="bootstrap templates",
        check="fermix_core.doctor_checks:check_bootstrap",
        order=70,
    )
    yield DoctorCheckSpec(
        name="channels",
        label="channels",
        check="fermix_core.channels.doctor:check_channels",
        order=80,
    )
    yield DoctorCheckSpec(
        name="transcription",
        label="transcription",
        check="fermix_core.transcription.doctor:check_transcription",
        order=82,
    )
    yield DoctorCheckSpec(
        name="skills", label="skills", check="fermix_core.skills.doctor:check_skills", order=85
    )
    yield DoctorCheckSpec(
        name="mcp", label="MCP servers", check="fermix_core.mcp.doctor:check_mcp", order=87
    )


@hookimpl
def fermix_setup_steps():
    from fermix_core.setup_secrets import SECRETS_IN_CONFIG_OPTION

    yield SetupStepSpec(
        name="home",
        label="Fermix home",
        run="fermix_core.setup_steps:home_step",
        order=0,
        # Read by every step that stores a secret (fermix_core.setup_secrets).
        options=(SECRETS_IN_CONFIG_OPTION,),
    )
    from fermix_core.setup_personalization import PERSONALIZATION_STEP

    yield PERSONALIZATION_STEP
    from fermix_core.transcription.setup_step import TRANSCRIPTION_STEP

    yield TRANSCRIPTION_STEP
