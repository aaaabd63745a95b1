"""Registries built from small in-process plugins, and a throwaway FERMIX_HOME."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

import pytest
import tomlkit
from fermix_core.config import ConfigError, LoadedConfig, Secret, load_config
from fermix_core.home import FermixHome
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins import PluginHost, PluginRecord, SpecRegistry
from fermix_core.specs import (
    ChannelSpec,
    ConfigSectionSpec,
    ProviderSpec,
    ToolSpec,
    WebSearchBackendSpec,
)
from pydantic import BaseModel, ConfigDict, Field

# --------------------------------------------------------------------------- section models


class ChatChannelConfig(BaseModel):
    """Shaped like a real chat channel section."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    bot_token: Secret | None = None
    signing_secret: Secret | None = None
    streaming: Literal["off", "draft", "block"] | None = None
    allowed_user_ids: list[str] = Field(default_factory=list)
    owner_user_id: str | None = None
    album_debounce_ms: int = Field(default=3000, ge=0)


class TelegramTestConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    bot_token: Secret | None = None
    allowed_user_ids: list[int] = Field(default_factory=list)


class WeatherConfig(BaseModel):
    """A third-party top-level section; deliberately leaves ``extra`` at pydantic's default."""

    units: Literal["metric", "imperial"] = "metric"
    api_key: Secret | None = None
    city: str | None = None


class BrowserToolConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tabs: int = Field(default=8, ge=1, le=64)
    headless: bool = True


EFFORTFUL = frozenset(
    {"primary", "default_model", "base_url", "api_key", "reasoning_effort", "auth_mode"}
)


class Providers:
    @hookimpl
    def fermix_providers(self) -> Iterable[ProviderSpec]:
        yield ProviderSpec(
            name="openai",
            factory="fermix_test.providers:OpenAI",
            env_var="OPENAI_API_KEY",
            config_keys=EFFORTFUL | {"fast", "wire"},
            reasoning_efforts=("none", "low", "medium", "high", "xhigh", "max"),
            order=10,
        )
        yield ProviderSpec(
            name="anthropic",
            factory="fermix_test.providers:Anthropic",
            env_var="ANTHROPIC_API_KEY",
            auth_modes=("api_key", "oauth"),
            config_keys=EFFORTFUL,
            reasoning_efforts=("low", "medium", "high", "xhigh", "max"),
            order=20,
        )
        yield ProviderSpec(
            name="openrouter",
            factory="fermix_test.providers:OpenRouter",
            env_var="OPENROUTER_API_KEY",
            order=30,
        )
        yield ProviderSpec(
            name="ollama",
            factory="fermix_test.providers:Ollama",
            keyless=True,
            base_url_env="OLLAMA_BASE_URL",
            config_keys=frozenset({"primary", "default_model", "base_url"}),
            order=70,
        )


class Channels:
    @hookimpl
    def fermix_channels(self) -> Iterable[ChannelSpec]:
        yield ChannelSpec(
            name="slack",
            factory="fermix_test.channels:Slack",
            config_model=ChatChannelConfig,
            env={
                "SLACK_BOT_TOKEN": "bot_token",
                "SLACK_SIGNING_SECRET": "signing_secret",
                "SLACK_ALLOWED_USER_IDS": "allowed_user_ids",
            },
        )
        # A spec that (wrongly) maps TELEGRAM_BOT_TOKEN: core must still never read it.
        yield ChannelSpec(
            name="telegram",
            factory="fermix_test.channels:Telegram",
            config_model=TelegramTestConfig,
            env={
                "TELEGRAM_BOT_TOKEN": "bot_token",
                "TELEGRAM_ALLOWED_USER_IDS": "allowed_user_ids",
            },
        )


class Extras:
    @hookimpl
    def fermix_tools(self) -> Iterable[ToolSpec]:
        yield ToolSpec(
            name="browser",
            description="Drive a browser.",
            factory="fermix_test.tools:Browser",
            config_section="browser",
            config_model=BrowserToolConfig,
        )

    @hookimpl
    def fermix_config_sections(self) -> Iterable[ConfigSectionSpec]:
        yield ConfigSectionSpec(name="fermix_weather", model=WeatherConfig, description="Weather.")

    @hookimpl
    def fermix_web_search_backends(self) -> Iterable[WebSearchBackendSpec]:
        yield WebSearchBackendSpec(
            name="brave", factory="fermix_test.search:Brave", env_var="BRAVE_API_KEY"
        )


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def host() -> PluginHost:
    host = PluginHost()
    host.register(
        Providers(), "providers.test", distribution="fermix-test-providers", version="1.0"
    )
    host.register(Channels(), "channels.test", distribution="fermix-test-channels", version="1.0")
    host.register(Extras(), "tools.extras", distribution="fermix-test-extras", version="1.0")
    return host


@pytest.fixture
def registry(host: PluginHost) -> SpecRegistry:
    registry = host.collect()
    assert registry.errors == []
    return registry


@pytest.fixture
def empty_registry() -> SpecRegistry:
    return PluginHost().collect()


@pytest.fixture
def home(tmp_path: Path) -> FermixHome:
    return FermixHome(tmp_path / "fermix-home")


@pytest.fixture
def write_config(home: FermixHome) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        home.ensure()
        home.config_file.write_text(text, encoding="utf-8")
        return home.config_file

    return write


def failed_record(
    name: str, distribution: str | None = None, status: str = "failed"
) -> PluginRecord:
    """A plugin record as the loader leaves one that could not be used."""
    record = PluginRecord(
        name=name, value=f"{name}:plugin", distribution=distribution, version="1.0"
    )
    record.status = status  # type: ignore[assignment]
    record.error = (
        "import failed: ModuleNotFoundError: No module named 'x'" if status == "failed" else None
    )
    return record


@pytest.fixture
def make_record() -> Callable[..., PluginRecord]:
    return failed_record


@pytest.fixture
def load(home: FermixHome, registry: SpecRegistry) -> Callable[..., LoadedConfig]:
    """``load(text, environ={}, unavailable=(), registry=...)`` validates *text* in memory."""

    def run(text: str = "", **kw: object) -> LoadedConfig:
        kw.setdefault("environ", {})
        reg = kw.pop("registry", registry)
        return load_config(home, reg, document=tomlkit.parse(text), **kw)  # type: ignore[arg-type]

    return run


@pytest.fixture
def problems_of(load: Callable[..., LoadedConfig]) -> Callable[..., list[str]]:
    """The ``path: message`` lines loading *text* fails with (the load must fail)."""

    def run(text: str, **kw: object) -> list[str]:
        with pytest.raises(ConfigError) as caught:
            load(text, **kw)
        lines = str(caught.value).splitlines()
        assert lines == [str(p) for p in caught.value.problems]
        return lines

    return run
