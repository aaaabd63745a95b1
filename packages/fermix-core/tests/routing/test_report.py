"""The routing report behind `fermix providers list` and the doctor's provider rows."""

from __future__ import annotations

import json

import pytest
from fermix_core.boot import assemble
from fermix_core.doctor import DoctorContext, Status
from fermix_core.hookspecs import hookimpl
from fermix_core.routing.report import check_routes, providers_report
from fermix_core.specs import ProviderSpec

CONFIG = """
[fermix_core.providers.anthropic]
primary = true
api_key = "sk-ant-SECRET-1"

[fermix_core.providers.openai]
api_key = "@keyring"
default_model = "gpt-old"
reasoning_effort = "max"

[fermix_core.providers.local]
base_url = "http://user:hunter2@gpu.lan:11434/v1"
"""


def test_every_provider_gets_a_status_and_no_secret_value(load, registry, keyring_put) -> None:
    keyring_put("OPENAI_API_KEY", "sk-openai-SECRET-2")
    env = {"GATEWAY_API_KEY": "gw-SECRET-3"}
    report = providers_report(load(CONFIG, environ=env), registry, env)
    dumped = json.dumps(report)
    for secret in ("sk-ant-SECRET-1", "sk-openai-SECRET-2", "gw-SECRET-3", "hunter2"):
        assert secret not in dumped
    rows = {row["name"]: row for row in report["providers"]}
    assert list(rows) == ["subscription", "openai", "anthropic", "gateway", "local"]
    assert {n: r["status"] for n, r in rows.items()} == {
        "subscription": "Not configured",
        "openai": "Fallback",
        "anthropic": "Primary",
        "gateway": "Fallback",
        "local": "Fallback",
    }
    assert report["primary"] == "anthropic"
    assert report["fallbacks"] == ["openai", "gateway", "local"]
    assert report["chosen_by"] == "flag" and report["problem"] is None
    assert rows["anthropic"]["key_source"] == "plaintext"
    assert rows["openai"]["key_source"] == "keyring"
    assert rows["gateway"]["key_source"] == "env:GATEWAY_API_KEY"
    assert rows["local"]["key_source"] == "keyless" and rows["local"]["auth_mode"] == "none"
    assert rows["local"]["base_url"] == "http://gpu.lan:11434/v1"
    assert rows["subscription"]["key_source"] == "oauth:subscription_oauth"
    assert "fermix auth login" in rows["subscription"]["problem"]
    assert rows["openai"]["reasoning_effort"] == "xhigh"
    assert rows["openai"]["notes"] and "xhigh" in rows["openai"]["notes"][0]
    assert rows["gateway"]["reasoning_effort"] is None
    assert report["routing"] == {"subagent": None, "cron": None}


def test_an_empty_setup_reports_the_fix(load, registry) -> None:
    report = providers_report(load(""), registry, {})
    assert report["primary"] is None and report["fallbacks"] == []
    assert "fermix setup" in report["problem"]
    assert all(row["status"] == "Not configured" for row in report["providers"])


def test_overlays_are_reported_with_their_errors(load, registry) -> None:
    text = CONFIG + '\n[fermix_core.routing]\nsubagent_model = "gpt-mini"\n'
    text += 'cron_provider = "gateway"\ncron_model = "qwen3"\n'
    report = providers_report(load(text), registry, {})
    assert report["routing"]["subagent"] == {
        "provider": "anthropic",
        "model": "gpt-mini",
        "reasoning_effort": None,
    }
    assert "qwen3" in report["routing"]["cron"]["error"]


# --------------------------------------------------------------------------- doctor


class Registered:
    """Hands the registry's provider specs to a real assembly, as an installed plugin would."""

    def __init__(self, specs: tuple[ProviderSpec, ...]) -> None:
        self.specs = specs

    @hookimpl
    def fermix_providers(self) -> tuple[ProviderSpec, ...]:
        return self.specs


@pytest.fixture
def context_for(fermix_home, registry):
    specs = tuple(registry.typed(ProviderSpec).values())

    def build(text: str, environ: dict[str, str] | None = None) -> DoctorContext:
        fermix_home.config_file.write_text(text)
        assembly = assemble(
            fermix_home,
            environ=environ or {},
            plugins=[("providers.fake", Registered(specs))],
            entry_points=False,
        )
        return DoctorContext(assembly, config=assembly.load_config())

    return build


def test_doctor_lists_primary_and_fallbacks(context_for) -> None:
    rows = check_routes(context_for(CONFIG, {"GATEWAY_API_KEY": "g"}))
    by_label = {r.label: r for r in rows}
    primary = by_label["primary provider"]
    assert primary.status is Status.OK
    assert primary.detail.startswith("anthropic (claude-a")
    assert "sk-ant" not in primary.detail
    fallbacks = by_label["fallback providers"]
    assert fallbacks.status is Status.OK
    # openai's keyring entry is missing; the gateway key comes from the environment.
    assert fallbacks.detail == "gateway, local"
    assert all(r.status is not Status.FAIL for r in rows)


def test_doctor_fails_without_any_provider(context_for) -> None:
    [row] = check_routes(context_for(""))
    assert row.status is Status.FAIL and "fermix setup" in (row.fix or "")


def test_doctor_fails_an_unconfigured_primary_and_warns_on_clamps(context_for) -> None:
    text = """
[fermix_core.providers.gateway]
primary = true

[fermix_core.providers.openai]
api_key = "sk-o"
default_model = "gpt-old"
reasoning_effort = "max"
"""
    rows = check_routes(context_for(text))
    by_label = {r.label: r for r in rows}
    assert by_label["primary provider"].status is Status.FAIL
    assert by_label["fallback providers"].detail == "openai"
    warn = by_label["provider openai"]
    assert warn.status is Status.WARN and "xhigh" in warn.detail


def test_doctor_fails_a_mispaired_overlay(context_for) -> None:
    text = CONFIG + '\n[fermix_core.routing]\ncron_provider = "local"\ncron_model = "claude-a"\n'
    rows = check_routes(context_for(text))
    [bad] = [r for r in rows if r.label == "routing (cron)"]
    assert bad.status is Status.FAIL and "claude-a" in bad.detail


def test_doctor_skips_when_config_did_not_load(fermix_home) -> None:
    fermix_home.config_file.write_text("")
    assembly = assemble(fermix_home, environ={}, entry_points=False)
    [row] = check_routes(DoctorContext(assembly, config=None))
    assert row.status is Status.SKIP
