"""Small provider specs shaped like the real families, a real home, real config files.

fermix-providers is not installed in core's isolated test environment, so these specs stand
in for it: an OAuth-only subscription provider, an API-key provider with per-model effort
ceilings (named ``openai`` because the Realtime key rule is about that slot), a two-mode
provider without ``none``, a keyless local server and an effortless gateway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pytest
from fermix_core.authfile import AuthStore
from fermix_core.config import LoadedConfig, load_config
from fermix_core.home import FermixHome
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins import PluginHost, SpecRegistry
from fermix_core.provider import ProviderSettings
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing import ScriptedProvider

ALL_EFFORTS = ("none", "low", "medium", "high", "xhigh", "max")
BASE = frozenset({"primary", "default_model", "base_url"})

#: Every provider built by the fake factory, so tests can reach the instance they got.
BUILT: list[ScriptedProvider] = []


def fake_factory(spec: ProviderSpec, settings: ProviderSettings) -> ScriptedProvider:
    provider = ScriptedProvider(name=spec.name, model=settings.default_model or "")
    provider.settings = settings  # type: ignore[attr-defined]
    BUILT.append(provider)
    return provider


SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="subscription",
        label="Subscription",
        factory=fake_factory,
        wire="responses",
        auth_modes=("oauth",),
        config_keys=BASE | {"reasoning_effort", "fast"},
        reasoning_efforts=ALL_EFFORTS,
        default_model="sub-big",
        default_base_url="https://sub.example.test/api",
        models=(
            ModelInfo("sub-big", 272_000, vision=True, max_effort="max"),
            ModelInfo("sub-old", 272_000, vision=True, max_effort="xhigh"),
        ),
        order=10,
    ),
    ProviderSpec(
        name="openai",
        label="OpenAI",
        factory=fake_factory,
        wire="responses",
        env_var="OPENAI_API_KEY",
        config_keys=BASE | {"api_key", "reasoning_effort", "wire"},
        reasoning_efforts=ALL_EFFORTS,
        default_model="gpt-new",
        default_base_url="https://api.openai.example.test/v1",
        models=(
            ModelInfo("gpt-new", 400_000, vision=True, max_effort="max"),
            ModelInfo("gpt-old", 400_000, vision=True, max_effort="xhigh"),
            ModelInfo("gpt-mini", 400_000, vision=True, max_effort="xhigh"),
        ),
        order=20,
    ),
    ProviderSpec(
        name="anthropic",
        label="Anthropic",
        factory=fake_factory,
        wire="anthropic_messages",
        auth_modes=("api_key", "oauth"),
        env_var="ANTHROPIC_API_KEY",
        config_keys=BASE | {"api_key", "reasoning_effort", "auth_mode"},
        reasoning_efforts=("low", "medium", "high", "xhigh", "max"),
        default_model="claude-a",
        default_base_url="https://api.anthropic.example.test/v1",
        models=(ModelInfo("claude-a", 200_000, vision=True),),
        order=30,
    ),
    ProviderSpec(
        name="gateway",
        label="Gateway",
        factory=fake_factory,
        env_var="GATEWAY_API_KEY",
        config_keys=BASE | {"api_key"},
        default_model="vendor/model-1",
        default_base_url="https://gateway.example.test/v1",
        models=(ModelInfo("vendor/model-1", 128_000, vision=True),),
        order=50,
    ),
    ProviderSpec(
        name="local",
        label="Local server",
        factory=fake_factory,
        auth_modes=("none",),
        keyless=True,
        base_url_env="LOCAL_BASE_URL",
        config_keys=BASE,
        default_model="qwen3",
        default_base_url="http://localhost:11434/v1",
        models=(ModelInfo("qwen3", 40_960), ModelInfo("llava", 4_096, vision=True)),
        order=70,
    ),
)


class FakeProviders:
    @hookimpl
    def fermix_providers(self) -> Iterable[ProviderSpec]:
        return SPECS


@pytest.fixture
def registry() -> SpecRegistry:
    host = PluginHost()
    host.register(FakeProviders(), "providers.fake", distribution="fermix-fake", version="1.0")
    registry = host.collect()
    assert registry.errors == []
    return registry


@pytest.fixture
def built() -> Iterator[list[ScriptedProvider]]:
    """The providers the fake factory builds during the test, in order."""
    BUILT.clear()
    yield BUILT
    BUILT.clear()


@pytest.fixture
def auth_store(fermix_home: FermixHome) -> AuthStore:
    return AuthStore(fermix_home.auth_file)


@pytest.fixture
def load(fermix_home: FermixHome, registry: SpecRegistry) -> Callable[..., LoadedConfig]:
    """``load(toml, environ={...})`` writes config.toml into the home and loads it for real."""

    def run(text: str = "", environ: Mapping[str, str] | None = None, **kw: Any) -> LoadedConfig:
        fermix_home.config_file.write_text(text, encoding="utf-8")
        return load_config(fermix_home, kw.pop("registry", registry), environ=environ or {}, **kw)

    return run


@pytest.fixture
def keyring_put(fermix_home: FermixHome) -> Callable[[str, str], None]:
    """Store a secret in the (in-memory) keyring under the default profile."""
    import keyring
    from fermix_core.secrets import KEYRING_ACCOUNT, keyring_service

    def put(env: str, value: str) -> None:
        keyring.set_password(keyring_service(env), KEYRING_ACCOUNT, value)

    return put
