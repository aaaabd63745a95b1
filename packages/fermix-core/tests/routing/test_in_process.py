"""A keyless provider that answers in process needs no fake ``base_url`` (``needs_server``)."""

from __future__ import annotations

import logging

import pytest
from fermix_core.api import Fermix
from fermix_core.boot import assemble
from fermix_core.doctor import DoctorContext, Status
from fermix_core.hookspecs import hookimpl
from fermix_core.routing import resolve_routes
from fermix_core.routing.report import check_routes
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing import FunctionProvider


def echo_factory(spec, settings):
    return FunctionProvider(lambda request: f"echo: {request.messages[-1].text}", name=spec.name)


def spec_for(name: str, *, needs_server: bool) -> ProviderSpec:
    return ProviderSpec(
        name=name,
        factory=echo_factory,
        keyless=True,
        needs_server=needs_server,
        default_model="echo-1",
        models=(ModelInfo(id="echo-1", context_window=8_000),),
    )


class Plugin:
    def __init__(self, *specs: ProviderSpec) -> None:
        self.specs = specs

    @hookimpl
    def fermix_providers(self):
        return list(self.specs)


WARNING = "calls will fail"


@pytest.mark.anyio
async def test_an_in_process_provider_runs_without_a_base_url_or_a_warning(
    tmp_path, caplog
) -> None:
    config = {"fermix_core": {"providers": {"echo": {"primary": True}}}}
    caplog.set_level(logging.WARNING, logger="fermix.routing")
    async with Fermix.open(
        home=tmp_path / "home",
        config=config,
        environ={},
        plugins=[("providers.echo", Plugin(spec_for("echo", needs_server=False)))],
        entry_points=False,
    ) as fx:
        outcome = await fx.ask("hi", session="s")
        assert fx.status()["primary_provider"] == "echo"
    assert (outcome.status, outcome.text) == ("ok", "echo: hi")
    assert WARNING not in caplog.text


def _doctor(home, text: str, *specs: ProviderSpec) -> DoctorContext:
    home.config_file.write_text(text)
    assembly = assemble(
        home, environ={}, plugins=[("providers.echo", Plugin(*specs))], entry_points=False
    )
    return DoctorContext(assembly, config=assembly.load_config())


def test_doctor_passes_an_in_process_primary_without_base_url(fermix_home, caplog) -> None:
    ctx = _doctor(
        fermix_home,
        "[fermix_core.providers.echo]\nprimary = true\n",
        spec_for("echo", needs_server=False),
    )
    rows = {r.label: r for r in check_routes(ctx)}
    assert rows["primary provider"].status is Status.OK, rows["primary provider"]
    assert "key: in-process" in rows["primary provider"].detail
    caplog.set_level(logging.WARNING, logger="fermix.routing")
    plan = resolve_routes(ctx.config, ctx.registry, {})
    assert plan.primary is not None and plan.primary.configured
    assert WARNING not in caplog.text


def test_a_server_provider_without_base_url_still_warns_and_fails_doctor(
    fermix_home, caplog
) -> None:
    ctx = _doctor(
        fermix_home,
        "[fermix_core.providers.echo]\nprimary = true\n",
        spec_for("echo", needs_server=True),
    )
    rows = {r.label: r for r in check_routes(ctx)}
    assert rows["primary provider"].status is Status.FAIL
    assert "no server configured" in rows["primary provider"].detail
    caplog.set_level(logging.WARNING, logger="fermix.routing")
    resolve_routes(ctx.config, ctx.registry, {})
    assert WARNING in caplog.text


def test_an_unwritten_in_process_provider_is_not_an_automatic_fallback(fermix_home) -> None:
    ctx = _doctor(
        fermix_home,
        "[fermix_core.providers.echo]\nprimary = true\n",
        spec_for("echo", needs_server=False),
        spec_for("spare", needs_server=False),
    )
    plan = resolve_routes(ctx.config, ctx.registry, {})
    assert plan.primary_provider == "echo"
    assert plan.fallback_providers == []
    ctx = _doctor(
        fermix_home,
        "[fermix_core.providers.echo]\nprimary = true\n\n[fermix_core.providers.spare]\n",
        spec_for("echo", needs_server=False),
        spec_for("spare", needs_server=False),
    )
    assert resolve_routes(ctx.config, ctx.registry, {}).fallback_providers == ["spare"]


def test_needs_server_false_with_a_base_url_variable_is_a_spec_problem() -> None:
    spec = ProviderSpec(
        name="echo", factory=echo_factory, keyless=True, needs_server=False, base_url_env="ECHO_URL"
    )
    assert any("needs_server" in p for p in spec.problems())
