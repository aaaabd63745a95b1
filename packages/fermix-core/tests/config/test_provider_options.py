"""A provider plugin's own settings: ``ProviderSpec.config_model`` under its provider block."""

from __future__ import annotations

import pytest
from fermix_core.api import Fermix
from fermix_core.config import Secret, secret_fields
from fermix_core.config.models import ProviderConfig
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins import PluginHost
from fermix_core.provider import ProviderSettings
from fermix_core.specs import CORE_PROVIDER_KEYS, ModelInfo, ProviderSpec
from fermix_core.testing import FunctionProvider
from pydantic import BaseModel, ConfigDict, Field


class AcmeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prefix: str = "acme: "
    temperature: float = Field(default=0.2, ge=0, le=2)
    org_token: Secret | None = None


class ClashingOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str = "x"


def acme_factory(spec: ProviderSpec, settings: ProviderSettings) -> FunctionProvider:
    options = settings.options
    assert isinstance(options, AcmeOptions)

    def answer(request) -> str:
        return f"{options.prefix}{request.messages[-1].text} (t={options.temperature})"

    return FunctionProvider(answer, name="acme", model="acme-1")


ACME = ProviderSpec(
    name="acme",
    factory=acme_factory,
    keyless=True,
    config_model=AcmeOptions,
    default_model="acme-1",
    default_base_url="http://127.0.0.1/unused",
    models=(ModelInfo(id="acme-1", context_window=8_000),),
)


class AcmePlugin:
    def __init__(self, spec: ProviderSpec = ACME) -> None:
        self.spec = spec

    @hookimpl
    def fermix_providers(self):
        yield self.spec


def registry_with(spec: ProviderSpec = ACME):
    host = PluginHost()
    host.register(AcmePlugin(spec), "providers.acme", distribution="fermix-acme", version="0.1")
    return host.collect()


def test_the_core_key_list_in_specs_is_the_config_model_s() -> None:
    assert frozenset(ProviderConfig.model_fields) == CORE_PROVIDER_KEYS


def test_a_provider_s_own_keys_are_validated_by_its_config_model(load) -> None:
    text = (
        '[fermix_core.providers.acme]\nprimary = true\nbase_url = "http://127.0.0.1:9/v1"\n'
        'prefix = ">> "\ntemperature = 1.5\n'
    )
    loaded = load(text, registry=registry_with())
    options = loaded.provider_options("acme")
    assert isinstance(options, AcmeOptions)
    assert (options.prefix, options.temperature) == (">> ", 1.5)
    assert loaded.provider_config("acme").primary is True
    effective = loaded.effective()["fermix_core"]["providers"]["acme"]
    assert effective["prefix"] == ">> " and effective["primary"] is True


def test_an_unwritten_block_delivers_the_model_defaults(load) -> None:
    loaded = load("", registry=registry_with())
    assert loaded.provider_options("acme") == AcmeOptions()


def test_bad_own_keys_fail_config_load_with_their_full_path(problems_of) -> None:
    registry = registry_with()
    lines = problems_of(
        "[fermix_core.providers.acme]\ntemperature = 9.0\nprefx = 'x'\n", registry=registry
    )
    assert len(lines) == 2, lines
    assert lines[0].startswith("fermix_core.providers.acme.prefx: ")
    assert "prefix" in lines[0]  # did you mean
    assert lines[1].startswith("fermix_core.providers.acme.temperature: ")


def test_core_keys_the_provider_did_not_choose_stay_refused(problems_of) -> None:
    assert problems_of(
        "[fermix_core.providers.acme]\nreasoning_effort = 'high'\n", registry=registry_with()
    ) == ["fermix_core.providers.acme.reasoning_effort: not allowed for this provider"]


def test_without_a_config_model_unknown_keys_still_fail(problems_of) -> None:
    spec = ProviderSpec(name="acme", factory=acme_factory, keyless=True)
    [line] = problems_of(
        "[fermix_core.providers.acme]\nprefix = 'x'\n", registry=registry_with(spec)
    )
    assert line.startswith("fermix_core.providers.acme.prefix: unknown key")


def test_a_config_model_field_named_like_a_core_key_is_the_plugin_s_fault(problems_of) -> None:
    spec = ProviderSpec(
        name="acme", factory=acme_factory, keyless=True, config_model=ClashingOptions
    )
    [line] = problems_of("[fermix_core.providers.acme]\n", registry=registry_with(spec))
    assert "fermix-acme" in line and "base_url" in line


def test_impossible_config_keys_are_refused_at_registration() -> None:
    spec = ProviderSpec(name="acme", factory=acme_factory, config_keys=frozenset({"prefix"}))
    [problem] = spec.problems()
    assert "'prefix'" in problem and "config_model" in problem
    registry = registry_with(spec)
    assert "acme" not in registry.typed(ProviderSpec)
    [error] = registry.errors
    assert "config_keys" in error.message and "fermix-acme" in error.sources[0]


def test_a_secret_among_the_own_keys_is_a_secret_slot(load) -> None:
    loaded = load(
        '[fermix_core.providers.acme]\norg_token = "@keyring"\n', registry=registry_with()
    )
    slots = {f.path: f for f in secret_fields(loaded, loaded.registry)}
    slot = slots[("fermix_core", "providers", "acme", "org_token")]
    assert slot.env == "FERMIX_PROVIDERS_ACME_ORG_TOKEN"
    assert slot.value == "@keyring"


@pytest.mark.anyio
async def test_the_adapter_receives_its_validated_options_in_a_real_turn(tmp_path) -> None:
    config = {
        "fermix_core": {
            "providers": {
                "acme": {
                    "primary": True,
                    "base_url": "http://127.0.0.1/unused",
                    "prefix": "[acme] ",
                    "temperature": 0.7,
                }
            }
        }
    }
    async with Fermix.open(
        home=tmp_path / "home",
        config=config,
        environ={},
        plugins=[("providers.acme", AcmePlugin())],
        entry_points=False,
    ) as fx:
        outcome = await fx.ask("hello", session="t")
    assert outcome.status == "ok", outcome.text
    assert outcome.text == "[acme] hello (t=0.7)"
