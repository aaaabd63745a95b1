"""The provider setup step through core's real ``run_setup``: real config.toml, real keyring."""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import keyring
import pytest
import tomlkit
from fermix_core.boot import assemble
from fermix_core.home import FermixHome
from fermix_core.secrets import KEYRING_ACCOUNT, keyring_service
from fermix_core.setup import (
    SetupContext,
    SetupError,
    SetupInputError,
    SetupIO,
    parse_step_args,
    run_setup,
)
from fermix_core.specs import ProviderSpec
from fermix_providers import catalog, core_plugin


def make_assembly(home: FermixHome, environ: dict[str, str] | None = None):
    plugins: list[tuple[str, Any]] = [
        (f"providers.{name}", importlib.import_module(module))
        for name, module in catalog.PLUGIN_MODULES.items()
    ]
    plugins.append(("providers.setup", core_plugin))
    env = {"FERMIX_HOME": str(home.path), **(environ or {})}
    assembly = assemble(home, environ=env, plugins=plugins, entry_points=False)
    assert assembly.registry.errors == []
    return assembly


def setup(home: FermixHome, *args: str, environ: dict[str, str] | None = None, io=None):
    assembly = make_assembly(home, environ)
    options = parse_step_args(assembly, list(args))
    # Only the steps under test: core's personalization step would prompt and write too.
    only = ("home", "provider")
    return run_setup(assembly, interactive=io is not None, options=options, io=io, only=only)


def providers(home: FermixHome) -> dict[str, dict[str, Any]]:
    data = tomlkit.parse(home.config_file.read_text()).unwrap()
    return data["fermix_core"]["providers"]


def stored_key(env: str) -> str | None:
    return keyring.get_password(keyring_service(env), KEYRING_ACCOUNT)


class Script:
    """Answers prompts in order and remembers what was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise AssertionError(f"unexpected prompt {prompt!r}")
        return self.answers.pop(0)


def scripted(prompts: Script, secrets: Script | None = None) -> tuple[SetupIO, list[str]]:
    shown: list[str] = []
    io = SetupIO(prompt=prompts, secret_prompt=secrets or Script(), echo=shown.append)
    return io, shown


def write_config(home: FermixHome, text: str) -> None:
    home.config_file.write_text(text)
    home.config_file.chmod(0o600)


# --------------------------------------------------------------------------- the step record


def test_the_step_is_registered_with_its_flags() -> None:
    spec = next(iter(core_plugin.fermix_setup_steps()))
    assert (spec.name, spec.order) == ("provider", 100)
    flags = {o.flag: o for o in spec.options}
    assert set(flags) >= {"--provider", "--api-key", "--model", "--base-url", "--reasoning-effort"}
    assert flags["--api-key"].secret
    assert spec.problems() == []


# --------------------------------------------------------------------------- non-interactive


def test_flags_configure_a_provider_and_the_key_goes_to_the_keyring(fermix_home) -> None:
    result = setup(
        fermix_home,
        "--provider",
        "openai",
        "--api-key",
        "sk-test-123",
        "--model",
        "gpt-5.5",
        "--reasoning-effort",
        "xhigh",
    )
    assert result.written
    block = providers(fermix_home)["openai"]
    assert block == {
        "api_key": "@keyring",
        "default_model": "gpt-5.5",
        "reasoning_effort": "xhigh",
        "primary": True,
    }
    assert "sk-test-123" not in fermix_home.config_file.read_text()
    assert stored_key("OPENAI_API_KEY") == "sk-test-123"
    assert "fermix_core.providers.openai.api_key" in result.moved_secrets
    assert any("openai is the primary provider" in n for n in result.notes)
    assert any("next daemon start" in n for n in result.notes)


def test_a_new_provider_takes_primary_and_the_old_one_keeps_its_settings(fermix_home) -> None:
    write_config(
        fermix_home,
        """# my providers
[fermix_core.providers.anthropic]
primary = true  # the one I use
api_key = "@keyring"
default_model = "claude-opus-4-6"
reasoning_effort = "high"
""",
    )
    keyring.set_password(keyring_service("ANTHROPIC_API_KEY"), KEYRING_ACCOUNT, "sk-ant-api-x")
    result = setup(fermix_home, "--provider", "mistral", "--api-key", "mk-1")
    blocks = providers(fermix_home)
    assert blocks["mistral"]["primary"] is True
    assert blocks["anthropic"] == {
        "primary": False,
        "api_key": "@keyring",
        "default_model": "claude-opus-4-6",
        "reasoning_effort": "high",
    }
    assert stored_key("ANTHROPIC_API_KEY") == "sk-ant-api-x"
    text = fermix_home.config_file.read_text()
    assert "# my providers" in text and "# the one I use" in text
    assert any("anthropic keeps its settings" in n for n in result.notes)


def test_without_provider_flags_nothing_changes(fermix_home) -> None:
    write_config(fermix_home, '[fermix_core.providers.openai]\nprimary = true\napi_key = "k"\n')
    before = fermix_home.config_file.read_text()
    result = setup(fermix_home)
    assert any("openai stays primary" in n for n in result.notes)
    # (the plaintext key is moved to the keyring by the save, nothing else changes)
    assert providers(fermix_home)["openai"]["primary"] is True
    assert before.replace('"k"', '"@keyring"') == fermix_home.config_file.read_text()


def test_provider_flags_without_provider_name_it(fermix_home) -> None:
    with pytest.raises(SetupInputError, match="pass --provider NAME"):
        setup(fermix_home, "--model", "gpt-5.5")
    assert not fermix_home.config_file.exists()


def test_first_run_without_provider_says_how(fermix_home) -> None:
    result = setup(fermix_home)
    assert any("No model provider is configured" in n for n in result.notes)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--provider", "nope"), "unknown provider 'nope'"),
        (("--provider", "openai"), "needs an API key: pass --api-key KEY \\(or --api-key-env"),
        (("--provider", "openai", "--api-key", "a b"), "contains spaces"),
        (("--provider", "ollama", "--api-key", "k"), "keyless"),
        (("--provider", "openai_codex", "--api-key", "k"), "not an API key"),
        (
            ("--provider", "anthropic", "--api-key", "sk-ant-oat01-aaaaaaaaaaaaaaaaaaaa"),
            "subscription token, not an API key",
        ),
        (("--provider", "openai", "--api-key", "k", "--base-url", "ftp://x"), "not an http"),
        (("--provider", "openai", "--api-key", "k", "--model", " "), "--model is empty"),
    ],
)
def test_bad_flags_are_refused_and_nothing_is_written(fermix_home, args, message) -> None:
    with pytest.raises(SetupError, match=message):
        setup(fermix_home, *args)
    assert not fermix_home.config_file.exists()


def test_the_key_may_come_from_the_environment(fermix_home) -> None:
    setup(fermix_home, "--provider", "xai", environ={"XAI_API_KEY": "xai-env"})
    block = providers(fermix_home)["xai"]
    assert block["primary"] is True
    assert "api_key" not in block


def test_oauth_mode_needs_no_key_and_points_at_the_login(fermix_home) -> None:
    result = setup(fermix_home, "--provider", "anthropic", "--auth-mode", "oauth")
    block = providers(fermix_home)["anthropic"]
    assert block["auth_mode"] == "oauth" and block["primary"] is True
    assert "api_key" not in block
    assert any("fermix auth login --provider anthropic" in n for n in result.notes)


def test_passing_a_key_switches_an_oauth_provider_back_to_api_key(fermix_home) -> None:
    write_config(fermix_home, '[fermix_core.providers.xai]\nauth_mode = "oauth"\n')
    result = setup(fermix_home, "--provider", "xai", "--api-key", "xai-k")
    assert providers(fermix_home)["xai"]["auth_mode"] == "api_key"
    assert any("auth_mode changed from oauth to api_key" in n for n in result.notes)


def test_codex_is_configured_without_a_key(fermix_home) -> None:
    result = setup(fermix_home, "--provider", "codex")
    assert providers(fermix_home)["openai_codex"] == {
        "default_model": "gpt-5.6-codex",
        "primary": True,
    }
    assert any("fermix auth login --provider openai_codex" in n for n in result.notes)


def test_ollama_gets_its_default_url_when_none_is_given(fermix_home) -> None:
    setup(fermix_home, "--provider", "ollama", "--model", "llama3.2")
    block = providers(fermix_home)["ollama"]
    assert block["base_url"] == "http://localhost:11434/v1"
    assert block["default_model"] == "llama3.2"


# --------------------------------------------------------------------------- effort


def test_effort_above_the_models_ceiling_is_refused(fermix_home) -> None:
    expected = r"gpt-5\.5 tops out below max; choose one of: none, low, medium, high, xhigh"
    with pytest.raises(SetupError, match=expected):
        setup(
            fermix_home,
            "--provider",
            "openai",
            "--api-key",
            "k",
            "--model",
            "gpt-5.5",
            "--reasoning-effort",
            "max",
        )


def test_effort_outside_the_providers_range_is_refused(fermix_home) -> None:
    with pytest.raises(SetupError, match="anthropic does not take none"):
        setup(
            fermix_home, "--provider", "anthropic", "--api-key", "k", "--reasoning-effort", "none"
        )
    with pytest.raises(SetupError, match="takes no reasoning effort"):
        setup(
            fermix_home, "--provider", "openrouter", "--api-key", "k", "--reasoning-effort", "low"
        )
    with pytest.raises(SetupError, match="'turbo' is not a reasoning effort"):
        setup(fermix_home, "--provider", "openai", "--api-key", "k", "--reasoning-effort", "turbo")


def test_a_stored_effort_the_new_model_cannot_take_is_clamped(fermix_home) -> None:
    write_config(
        fermix_home,
        '[fermix_core.providers.openai]\napi_key = "k"\nreasoning_effort = "max"\n',
    )
    result = setup(fermix_home, "--provider", "openai", "--model", "gpt-5.4-mini")
    assert providers(fermix_home)["openai"]["reasoning_effort"] == "xhigh"
    assert any("changed to xhigh" in n for n in result.notes)


# --------------------------------------------------------------------------- interactive


def test_interactive_picker_shows_status_and_offers_only_accepted_efforts(fermix_home) -> None:
    write_config(
        fermix_home,
        '[fermix_core.providers.anthropic]\nprimary = true\napi_key = "k"\n\n'
        '[fermix_core.providers.ollama]\nbase_url = "http://localhost:11434/v1"\n',
    )
    prompts = Script("2", "", "3", "xhigh")  # openai, no gateway, gpt-5.5, effort
    secrets = Script("sk-live-1")
    io, shown = scripted(prompts, secrets)
    setup(fermix_home, io=io, environ={"MISTRAL_API_KEY": "mk"})
    listing = [line for line in shown if line.startswith("  ") and "[" in line]
    assert [line.split()[-1] if "Not" not in line else "Not configured" for line in listing] == [
        "Not configured",  # openai_codex
        "Not configured",  # openai
        "Primary",  # anthropic
        "Not configured",  # xai
        "Not configured",  # openrouter
        "Fallback",  # mistral, from the environment
        "Fallback",  # ollama, from its base_url
    ]
    assert "1. OpenAI Codex" in listing[0]
    effort_line = next(line for line in shown if line.startswith("Reasoning effort for"))
    assert "gpt-5.5: none, low, medium, high, xhigh (" in effort_line
    assert "max" not in effort_line.split("(")[0]
    assert secrets.prompts == ["OpenAI API key: "]
    blocks = providers(fermix_home)
    assert blocks["openai"] == {
        "api_key": "@keyring",
        "default_model": "gpt-5.5",
        "reasoning_effort": "xhigh",
        "primary": True,
    }
    assert blocks["anthropic"]["primary"] is False
    assert stored_key("OPENAI_API_KEY") == "sk-live-1"


def test_interactive_answers_are_checked_and_asked_again(fermix_home) -> None:
    prompts = Script("99", "bogus", "anthropic", "maybe", "api_key", "", "none", "high")
    secrets = Script("", "sk-ant-oat01-notakey-aaaaaaaaaaaa", "sk-ant-api03-real")
    io, shown = scripted(prompts, secrets)
    setup(fermix_home, io=io)
    assert "  '99' is not a provider; type a number from the list or a name" in shown
    assert "  choose one of: api_key, oauth" in shown
    assert "  An API key is required for this provider." in shown
    assert any("subscription token" in line for line in shown)
    assert any("anthropic does not take none" in line for line in shown)
    block = providers(fermix_home)["anthropic"]
    assert block["default_model"] == "claude-sonnet-4-6"
    assert block["reasoning_effort"] == "high"
    assert stored_key("ANTHROPIC_API_KEY") == "sk-ant-api03-real"


def test_interactive_blank_key_keeps_the_stored_one(fermix_home) -> None:
    keyring.set_password(keyring_service("MISTRAL_API_KEY"), KEYRING_ACCOUNT, "old-key")
    write_config(fermix_home, '[fermix_core.providers.mistral]\napi_key = "@keyring"\n')
    prompts = Script("mistral", "", "")  # provider, no gateway, model
    secrets = Script("")
    io, _ = scripted(prompts, secrets)
    setup(fermix_home, io=io)
    assert secrets.prompts == ["Mistral API key (blank keeps the stored key): "]
    assert stored_key("MISTRAL_API_KEY") == "old-key"
    assert providers(fermix_home)["mistral"]["primary"] is True


def test_an_openai_compatible_provider_is_offered_a_gateway_url(fermix_home) -> None:
    prompts = Script("openrouter", "ftp://nope", "https://gw.example/api/v1/", "")
    io, shown = scripted(prompts, Script("sk-or-v1-key"))
    setup(fermix_home, io=io)
    assert prompts.prompts[1] == (
        "Base URL of a compatible gateway (blank uses https://openrouter.ai/api/v1): "
    )
    assert any("is not an http(s) URL" in line for line in shown)
    assert providers(fermix_home)["openrouter"]["base_url"] == "https://gw.example/api/v1"


def test_interactive_gives_up_after_repeated_nonsense(fermix_home) -> None:
    io, _ = scripted(Script(*["nope"] * 5))
    with pytest.raises(SetupError, match="no provider was chosen"):
        setup(fermix_home, io=io)
    assert not fermix_home.config_file.exists()


# --------------------------------------------------------------------------- live listings


class ListingServer:
    def __init__(self, routes: dict[str, tuple[int, Any]]) -> None:
        self.routes = routes
        self.seen: list[tuple[str, str | None]] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                server.seen.append((self.path, self.headers.get("authorization")))
                status, body = server.routes.get(self.path, (404, {"error": "nope"}))
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


@pytest.fixture
def listing_server() -> Iterator[tuple[ListingServer, str]]:
    state = ListingServer({})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), state.handler())
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_ollama_lists_the_models_installed_on_the_server(fermix_home, listing_server) -> None:
    state, url = listing_server
    state.routes["/api/tags"] = (
        200,
        {"models": [{"name": "gemma3:latest"}, {"name": "mistral-nemo:12b"}]},
    )
    prompts = Script("ollama", f"{url}/v1", "2")
    io, shown = scripted(prompts)
    setup(fermix_home, io=io)
    assert "  1. gemma3" in shown and "  2. mistral-nemo:12b" in shown
    assert "  1. qwen3" not in shown  # the static catalog is not offered when the server answers
    block = providers(fermix_home)["ollama"]
    assert block == {"base_url": f"{url}/v1", "default_model": "mistral-nemo:12b", "primary": True}


def test_an_unreachable_ollama_shows_the_error_and_takes_any_model(fermix_home) -> None:
    prompts = Script("ollama", "http://127.0.0.1:9/v1", "my-own-model")
    io, shown = scripted(prompts)
    setup(fermix_home, io=io)
    assert any("Could not list models: cannot reach Ollama" in line for line in shown)
    assert any("ollama serve" in line for line in shown)
    assert providers(fermix_home)["ollama"]["default_model"] == "my-own-model"


def test_openrouter_offers_the_live_tool_capable_models(fermix_home, listing_server) -> None:
    state, url = listing_server
    state.routes["/api/v1/models"] = (
        200,
        {
            "data": [
                {"id": "old/tools", "created": 1, "supported_parameters": ["tools"]},
                {"id": "new/tools", "created": 9, "supported_parameters": ["tools"]},
                {"id": "no/tools", "created": 5, "supported_parameters": []},
            ]
        },
    )
    prompts = Script("openrouter", "1")
    secrets = Script("or-key")
    io, shown = scripted(prompts, secrets)
    setup(fermix_home, "--base-url", f"{url}/api/v1", io=io)
    models = [line for line in shown if line.startswith("  ") and ". " in line and "/" in line]
    assert models == ["  1. new/tools", "  2. old/tools"]
    assert state.seen == [("/api/v1/models", "Bearer or-key")]
    assert not any("Reasoning effort" in line for line in shown)
    assert providers(fermix_home)["openrouter"]["default_model"] == "new/tools"


def test_a_key_in_the_environment_is_not_called_a_fallback_before_a_primary(fermix_home) -> None:
    from fermix_providers.setup_step import provider_statuses

    assembly = make_assembly(fermix_home, {"MISTRAL_API_KEY": "mk"})
    context = SetupContext(assembly, tomlkit.document(), interactive=False, options={})
    specs = sorted(assembly.registry.typed(ProviderSpec).values(), key=lambda s: s.order)
    statuses = provider_statuses(context, specs)
    assert statuses["mistral"] == "Not configured ($MISTRAL_API_KEY is set)"
    assert "Fallback" not in statuses.values()
