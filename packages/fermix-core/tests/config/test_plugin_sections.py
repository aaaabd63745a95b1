"""Validation against the plugin registry: providers, plugin sections, ownership, did-you-mean."""

from __future__ import annotations

import pytest
from fermix_core.config import ConfigError
from fermix_core.config.schema import unavailable_owner
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins import PluginHost
from fermix_core.specs import ChannelSpec, ConfigSectionSpec, ProviderSpec
from pydantic import BaseModel, ConfigDict

# --------------------------------------------------------------------------- providers


def test_openrouter_rejects_reasoning_effort_with_the_exact_message(problems_of) -> None:
    lines = problems_of('[fermix_core.providers.openrouter]\nreasoning_effort = "high"\n')
    assert lines == [
        "fermix_core.providers.openrouter.reasoning_effort: not allowed for this provider"
    ]


def test_keys_outside_a_providers_allowlist_are_each_reported(problems_of) -> None:
    lines = problems_of(
        '[fermix_core.providers.ollama]\nbase_url = "http://gpu:11434/v1"\n'
        'api_key = "x"\nfast = true\nwire = "responses"\n'
    )
    assert lines == [
        "fermix_core.providers.ollama.api_key: not allowed for this provider",
        "fermix_core.providers.ollama.fast: not allowed for this provider",
        "fermix_core.providers.ollama.wire: not allowed for this provider",
    ]


def test_a_misspelt_provider_key_gets_a_did_you_mean(problems_of) -> None:
    assert problems_of('[fermix_core.providers.openai]\ndefualt_model = "gpt-5.5"\n') == [
        'fermix_core.providers.openai.defualt_model: unknown key (did you mean "default_model"?)'
    ]


def test_unknown_provider_name_gets_a_did_you_mean_and_the_valid_names(problems_of) -> None:
    assert problems_of("[fermix_core.providers.antropic]\nprimary = true\n") == [
        'fermix_core.providers.antropic: unknown provider "antropic" (did you mean "anthropic"?); '
        'known providers: "anthropic", "ollama", "openai", "openrouter"'
    ]


def test_no_provider_plugins_at_all_says_how_to_get_one(problems_of, empty_registry) -> None:
    lines = problems_of("[fermix_core.providers.openai]\nprimary = true\n", registry=empty_registry)
    expected = 'no provider plugin is loaded; install one (pip install "fermix-agent[providers]")'
    assert expected in lines[0]


def test_auth_mode_must_be_in_the_providers_own_subset_but_effort_clamps(problems_of, load) -> None:
    """A canonical effort outside a provider's subset loads: routing clamps it (and says so)."""
    lines = problems_of(
        '[fermix_core.providers.anthropic]\nreasoning_effort = "none"\n'
        '[fermix_core.providers.openai]\nauth_mode = "oauth"\n'
    )
    assert lines == [
        'fermix_core.providers.openai.auth_mode: must be one of "api_key" for this provider '
        '(got "oauth")',
    ]
    loaded = load('[fermix_core.providers.anthropic]\nreasoning_effort = "none"\n')
    assert loaded.provider_config("anthropic").reasoning_effort == "none"
    assert load('[fermix_core.providers.anthropic]\nauth_mode = "oauth"\n').provider_config(
        "anthropic"
    ).auth_mode == ("oauth")


def test_an_effort_outside_the_vocabulary_is_reported_once(problems_of) -> None:
    assert problems_of('[fermix_core.providers.openai]\nreasoning_effort = "turbo"\n') == [
        'fermix_core.providers.openai.reasoning_effort: must be one of "none", "low", "medium", '
        '"high", "xhigh", "max" (got "turbo")'
    ]


def test_more_than_one_primary_lists_them(problems_of, load) -> None:
    text = (
        "[fermix_core.providers.openai]\nprimary = true\n"
        "[fermix_core.providers.anthropic]\nprimary = true\n"
        "[fermix_core.providers.openrouter]\nprimary = false\n"
    )
    assert problems_of(text) == [
        "fermix_core.providers: more than one provider has primary = true (anthropic, openai); "
        "keep it on exactly one"
    ]
    loaded = load(
        "[fermix_core.providers.openai]\n[fermix_core.providers.anthropic]\nprimary = true\n"
    )
    assert loaded.core.fermix_core.primary_provider() == "anthropic"


def test_no_primary_falls_back_to_the_legacy_agent_provider(load, problems_of) -> None:
    loaded = load(
        '[fermix_core.agent]\nprovider = "openrouter"\n[fermix_core.providers.openrouter]\n'
    )
    assert loaded.core.fermix_core.primary_provider() == "openrouter"
    assert problems_of('[fermix_core.agent]\nprovider = "gpt"\n') == [
        'fermix_core.agent.provider: unknown provider "gpt"; known providers: "anthropic", '
        '"ollama", "openai", "openrouter"'
    ]


def test_a_provider_block_must_be_a_table(problems_of) -> None:
    assert problems_of('[fermix_core.providers]\nopenai = "yes"\n') == [
        'fermix_core.providers.openai: must be a table (got "yes")'
    ]


# --------------------------------------------------------------------------- plugin sections


def test_plugin_sections_are_validated_by_their_models(load) -> None:
    loaded = load(
        '[fermix_channels.slack]\nenabled = true\nstreaming = "draft"\nallowed_user_ids = ["U1"]\n'
        "[fermix_core.tools.browser]\nmax_tabs = 4\n"
        '[fermix_weather]\nunits = "imperial"\n'
    )
    slack = loaded.section("fermix_channels.slack")
    assert slack.streaming == "draft"
    assert slack.allowed_user_ids == ["U1"]
    assert loaded.core.fermix_channels["slack"] is slack
    assert loaded.section("fermix_core.tools.browser").max_tabs == 4
    assert loaded.section("fermix_weather").units == "imperial"
    assert loaded.section("fermix_channels.telegram") is None  # absent sections are not invented
    assert loaded.get("fermix_channels.telegram.enabled") is True  # but show their defaults


def test_channel_streaming_enum_names_every_valid_value(problems_of) -> None:
    assert problems_of('[fermix_channels.slack]\nstreaming = "fast"\n') == [
        'fermix_channels.slack.streaming: must be one of "off", "draft", "block" (got "fast")'
    ]


def test_unknown_keys_in_plugin_sections_carry_the_full_path(problems_of) -> None:
    lines = problems_of(
        '[fermix_channels.slack]\nbot_tokn = "xoxb-very-secret"\n'
        "[fermix_core.tools.browser]\nmax_tab = 3\nheadless = 1.5\n"
        '[fermix_weather]\nunit = "metric"\n'
    )
    assert lines == [
        'fermix_channels.slack.bot_tokn: unknown key (did you mean "bot_token"?)',
        "fermix_core.tools.browser.headless: must be true or false (got 1.5)",
        'fermix_core.tools.browser.max_tab: unknown key (did you mean "max_tabs"?)',
        'fermix_weather.unit: unknown key (did you mean "units"?)',
    ]
    assert "xoxb-very-secret" not in "\n".join(lines)


def test_unclaimed_sections_fail_with_a_did_you_mean(problems_of) -> None:
    lines = problems_of(
        "[fermix_channels.slak]\nenabled = true\n"
        "[fermix_core.compation]\nenabled = true\n"
        "[fermix_core.tools.brwoser]\nmax_tabs = 2\n"
        "[fermix_wether]\nunits = 'metric'\n"
        "[totally_unrelated]\nx = 1\n"
    )
    assert lines == [
        'fermix_channels.slak: unknown section (did you mean "fermix_channels.slack"?); no loaded '
        "plugin provides it — install the plugin that owns it or remove the section",
        'fermix_core.compation: unknown section (did you mean "fermix_core.compaction"?); '
        "no loaded "
        "plugin provides it — install the plugin that owns it or remove the section",
        "fermix_core.tools.brwoser: unknown section (did you mean "
        '"fermix_core.tools.browser"?); no '
        "loaded plugin provides it — install the plugin that owns it or remove the section",
        'fermix_wether: unknown section (did you mean "fermix_weather"?); no loaded plugin '
        "provides "
        "it — install the plugin that owns it or remove the section",
        "totally_unrelated: unknown section; no loaded plugin provides it — install the "
        "plugin that "
        "owns it or remove the section",
    ]


def test_unknown_keys_in_core_sections_get_did_you_mean(problems_of) -> None:
    assert problems_of(
        "[fermix_core.compaction]\ntreshold = 0.5\n[fermix_core]\nprofle = 'x'\n"
    ) == [
        'fermix_core.compaction.treshold: unknown key (did you mean "threshold"?)',
        'fermix_core.profle: unknown key (did you mean "fermix_core.profile"?)',
    ]


def test_all_problems_are_collected_into_one_error(problems_of) -> None:
    lines = problems_of(
        '[fermix_core.agent]\ntimezone = "Nowhere/Land"\n'
        "[fermix_core.compaction]\nthreshold = 7\n"
        '[fermix_channels.slack]\nstreaming = "fast"\n'
        "[sandbox]\nmode = 'wide'\n"
    )
    assert [line.split(":", 1)[0] for line in lines] == [
        "fermix_channels.slack.streaming",
        "fermix_core.agent.timezone",
        "fermix_core.compaction.threshold",
        "sandbox.mode",
    ]


def test_a_plugin_model_that_cannot_be_imported_is_blamed_on_the_plugin(load, home) -> None:
    class Broken:
        @hookimpl
        def fermix_config_sections(self):
            yield ConfigSectionSpec(
                name="fermix_broken", model="fermix_does_not_exist.config:Model"
            )

    host = PluginHost()
    host.register(Broken(), "tools.broken", distribution="fermix-broken", version="0.1")
    registry = host.collect()
    assert load("", registry=registry).sections == {}  # absent section: nothing to validate
    with pytest.raises(ConfigError) as caught:
        load("[fermix_broken]\nx = 1\n", registry=registry)
    message = str(caught.value)
    assert message.startswith(
        "fermix_broken: cannot load this section's model from plugin tools.broken"
    )
    assert "reinstall or disable that plugin" in message


def test_a_plugin_validator_crash_is_a_problem_not_a_crash(load) -> None:
    class Crashy(BaseModel):
        model_config = ConfigDict(extra="forbid")
        value: int = 0

        def model_post_init(self, _context: object) -> None:
            raise KeyError("boom")

    class Plugin:
        @hookimpl
        def fermix_config_sections(self):
            yield ConfigSectionSpec(name="crashy", model=Crashy)

    host = PluginHost()
    host.register(Plugin(), "crashy")
    with pytest.raises(ConfigError) as caught:
        load("[crashy]\nvalue = 1\n", registry=host.collect())
    assert str(caught.value) == (
        "crashy: the section model of plugin crashy (in-process) raised KeyError; "
        "report it to the plugin's author"
    )


def test_a_plugin_cannot_claim_a_core_section(load) -> None:
    class Model(BaseModel):
        mode: str = "x"

    class Grabby:
        @hookimpl
        def fermix_config_sections(self):
            yield ConfigSectionSpec(name="sandbox", model=Model)

    host = PluginHost()
    host.register(Grabby(), "grabby")
    loaded = load('[sandbox]\nmode = "strict"\n', registry=host.collect())
    assert loaded.core.sandbox.mode == "strict"
    assert [str(w) for w in loaded.warnings] == [
        "sandbox: plugin grabby (in-process) claims a section that core owns; its claim is ignored"
    ]


# --------------------------------------------------------------------------- unavailable plugins


def test_sections_of_unavailable_plugins_are_kept_untouched_with_a_warning(
    problems_of, load, empty_registry, make_record
) -> None:
    text = (
        '[fermix_channels.telegram]\nbot_token = "@keyring"\nnonsense_key = [1, 2]\n'
        "[fermix_core.providers.openrouter]\nreasoning_effort = 'anything'\n"
        '[fermix_weather]\nunits = "kelvin"\n'
    )
    unavailable = [
        make_record("channels.telegram", "fermix-channels"),
        make_record("providers.openrouter", "fermix-providers", status="disabled"),
        make_record("weather", "fermix-weather", status="blocked"),
    ]
    loaded = load(text, registry=empty_registry, unavailable=unavailable)
    assert loaded.untouched == {
        "fermix_channels.telegram": {"bot_token": "@keyring", "nonsense_key": [1, 2]},
        "fermix_core.providers.openrouter": {"reasoning_effort": "anything"},
        "fermix_weather": {"units": "kelvin"},
    }
    assert loaded.section("fermix_channels.telegram") == {
        "bot_token": "@keyring",
        "nonsense_key": [1, 2],
    }
    assert loaded.core.fermix_channels["telegram"]["nonsense_key"] == [1, 2]
    assert loaded.provider_config("openrouter") is None
    warnings = [str(w) for w in loaded.warnings]
    assert warnings[0].startswith(
        "fermix_channels.telegram: kept as is and not validated: its plugin channels.telegram "
        "(fermix-channels 1.0) failed to load (import failed: ModuleNotFoundError"
    )
    assert (
        "fermix_core.providers.openrouter: kept as is and not validated: its plugin "
        "providers.openrouter" in (warnings[1])
    )
    assert "is disabled" in warnings[1]
    assert warnings[2].startswith(
        "fermix_weather: kept as is and not validated: its plugin weather"
    )
    # Without the records the same file fails loud.
    assert len(problems_of(text, registry=empty_registry)) == 3


def test_a_broken_first_party_plugin_does_not_shelter_typos_in_shared_namespaces(
    problems_of, empty_registry, make_record
) -> None:
    lines = problems_of(
        "[fermix_channels.slak]\nenabled = true\n",
        registry=empty_registry,
        unavailable=[make_record("channels.telegram", "fermix-channels")],
    )
    assert lines[0].startswith("fermix_channels.slak: unknown section")


def test_legacy_provider_naming_an_unavailable_plugin_is_a_warning(
    load, registry, make_record
) -> None:
    loaded = load(
        '[fermix_core.agent]\nprovider = "mistral"\n',
        unavailable=[make_record("providers.mistral", "fermix-providers")],
    )
    assert [w.path for w in loaded.warnings] == ["fermix_core.agent.provider"]
    assert 'names provider "mistral" but its plugin providers.mistral' in loaded.warnings[0].message


def test_sections_of_a_plugin_whose_spec_was_rejected_are_kept(load) -> None:
    class Model(BaseModel):
        model_config = ConfigDict(extra="forbid")
        token: str | None = None

    def plugin(name: str):
        class Dup:
            @hookimpl
            def fermix_channels(self):
                yield ChannelSpec(name="matrix", factory="x.y:z", config_model=Model)

        return Dup()

    host = PluginHost()
    host.register(plugin("a"), "channels.matrix_a")
    host.register(plugin("b"), "channels.matrix_b")
    registry = host.collect()
    assert registry.errors  # both dropped: registered more than once
    loaded = load('[fermix_channels.matrix]\ntoken = "t"\n', registry=registry)
    assert loaded.untouched == {"fermix_channels.matrix": {"token": "t"}}
    assert "was rejected (registered more than once)" in str(loaded.warnings[0])


@pytest.mark.parametrize(
    ("path", "record", "owned"),
    [
        (("fermix_channels", "telegram"), ("channels.telegram", "fermix-channels"), True),
        (
            ("fermix_core", "providers", "openrouter"),
            ("providers.openrouter", "fermix-providers"),
            True,
        ),
        (("fermix_weather",), ("weather", "fermix-weather"), True),
        (("fermix_weather", "alerts"), ("weather", "Fermix_Weather"), True),
        (("fermix_core", "tools", "my_tool"), ("tools.my-tool", None), True),
        (("fermix_channels", "slack"), ("channels.telegram", "fermix-channels"), False),
        (("fermix_core", "agent"), ("core.builtins", "fermix-core"), False),
        (("other",), ("weather", "fermix-weather"), False),
    ],
)
def test_ownership_rule(path, record, owned, make_record, empty_registry) -> None:
    name, dist = record
    from fermix_core.plugins.discovery import canonical_dist_name

    rec = make_record(name, canonical_dist_name(dist) if dist else None)
    assert (unavailable_owner(path, [rec], empty_registry) is not None) is owned


def test_a_model_with_default_extra_still_rejects_unknown_keys(problems_of) -> None:
    # WeatherConfig leaves pydantic's extra="ignore"; core still refuses to drop keys silently.
    assert problems_of("[fermix_weather]\ncolour = 'blue'\n") == [
        'fermix_weather.colour: unknown key; valid keys: "units", "api_key", "city"'
    ]


def test_provider_spec_keys_decide_what_a_third_party_provider_accepts(load, problems_of) -> None:
    class Acme:
        @hookimpl
        def fermix_providers(self):
            yield ProviderSpec(
                name="acme",
                factory="fermix_acme:Acme",
                env_var="ACME_API_KEY",
                config_keys=frozenset({"api_key", "default_model", "wire"}),
            )

    host = PluginHost()
    host.register(Acme(), "providers.acme")
    registry = host.collect()
    assert load(
        '[fermix_core.providers.acme]\nwire = "responses"\n', registry=registry
    ).provider_config("acme").wire == ("responses")
    assert problems_of("[fermix_core.providers.acme]\nprimary = true\n", registry=registry) == [
        "fermix_core.providers.acme.primary: not allowed for this provider"
    ]
