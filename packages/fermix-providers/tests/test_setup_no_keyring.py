"""The interactive provider step on a machine whose keyring cannot store anything.

The keyring check comes before the key is asked for; the operator picks config.toml
(confirmed), an environment variable or a helper command, and the save follows the choice.
"""

from __future__ import annotations

import stat

import keyring
import pytest
import tomlkit
from fermix_core.setup import SetupError
from keyring.backends import fail

from .test_setup_step import Script, make_assembly, scripted

KEY = "sk-interactive-7777"


@pytest.fixture
def no_keyring(fermix_home):
    keyring.set_keyring(fail.Keyring())
    return fermix_home


def run(home, prompts: Script, secrets=None):
    from fermix_core.setup import parse_step_args, run_setup

    io, shown = scripted(prompts, secrets)
    assembly = make_assembly(home)
    result = run_setup(
        assembly,
        interactive=True,
        options=parse_step_args(assembly, []),
        io=io,
        only=("home", "provider"),
    )
    return result, shown


def openai_block(home) -> dict:
    return tomlkit.parse(home.config_file.read_text()).unwrap()["fermix_core"]["providers"][
        "openai"
    ]


def test_config_toml_needs_a_typed_yes_and_then_keeps_the_key_private(no_keyring) -> None:
    # provider, storage 1 + refusal, storage 1 + yes, gateway URL, model, effort
    prompts = Script("openai", "1", "no", "1", "yes", "", "", "")
    asked_before_key: list[str] = []

    def secret(prompt: str) -> str:
        asked_before_key.extend(prompts.prompts)
        return KEY

    result, shown = run(no_keyring, prompts, secret)
    assert any("No OS keyring can store secrets" in line for line in shown)
    assert any("not confirmed" in line for line in shown)
    # Where the key goes was settled before it was typed.
    assert asked_before_key[1] == asked_before_key[3] == "Choice [2]: "
    assert "Type yes to keep it there" in asked_before_key[4]
    assert openai_block(no_keyring)["api_key"] == KEY
    assert stat.S_IMODE(no_keyring.config_file.stat().st_mode) == 0o600
    assert any("kept in plaintext in config.toml" in n for n in result.notes)


def test_an_env_reference_is_the_default_and_asks_for_no_key(no_keyring) -> None:
    secrets = Script()  # never asked
    prompts = Script("openai", "", "", "", "", "")
    result, _ = run(no_keyring, prompts, secrets)
    assert openai_block(no_keyring)["api_key"] == {"source": "env", "env": "OPENAI_API_KEY"}
    assert any("read from $OPENAI_API_KEY" in n for n in result.notes)


def test_a_command_helper_is_split_without_a_shell(no_keyring) -> None:
    prompts = Script("openai", "3", "pass show 'fermix/open ai'", "", "", "")
    run(no_keyring, prompts)
    assert openai_block(no_keyring)["api_key"] == {
        "source": "command",
        "command": ["pass", "show", "fermix/open ai"],
    }


def test_giving_up_on_the_choice_writes_nothing(no_keyring) -> None:
    prompts = Script("openai", "9", "9", "9", "9", "9")
    with pytest.raises(SetupError) as info:
        run(no_keyring, prompts)
    assert "nothing was written" in str(info.value)
    assert not no_keyring.config_file.exists()


def test_with_a_keyring_writer_nothing_extra_is_asked(fermix_home) -> None:
    prompts = Script("openai", "", "", "")
    run(fermix_home, prompts, Script(KEY))
    assert "Choice [2]: " not in prompts.prompts
    assert openai_block(fermix_home)["api_key"] == "@keyring"


def test_a_misspelt_provider_gets_the_closest_name(fermix_home) -> None:
    from fermix_core.setup import parse_step_args, run_setup

    assembly = make_assembly(fermix_home)
    with pytest.raises(SetupError) as info:
        run_setup(
            assembly,
            interactive=False,
            options=parse_step_args(assembly, ["--provider", "openruter"]),
            only=("provider",),
        )
    assert "unknown provider 'openruter' for --provider (did you mean \"openrouter\"?)" in str(
        info.value
    )
    prompts = Script("openruter", "ollama", "", "", "")
    _, shown = run(fermix_home, prompts)
    assert (
        "  'openruter' is not a provider (did you mean \"openrouter\"?); type a number"
        in " ".join(shown)
    )


def test_no_step_header_stands_empty(fermix_home) -> None:
    _, shown = run(fermix_home, Script("ollama", "", ""))
    header = shown.index("== Fermix home ==")
    assert shown[header + 1] == f"Settings, logs and the workspace live in {fermix_home.path}"


def test_a_failed_run_remembers_where_the_key_goes(no_keyring) -> None:
    from fermix_core import setup_answers

    no_keyring.ensure()
    no_keyring.config_file.write_text("[fermix_core]\nno_such_key = 1\n")  # will not validate
    no_keyring.config_file.chmod(0o600)
    with pytest.raises(SetupError, match="nothing was written"):
        run(no_keyring, Script("openai", "3", "pass show fermix/openai", "", "", ""))
    kept = setup_answers.load(no_keyring)
    assert kept["--api-key storage"] == "3"
    assert kept["--api-key command"] == "pass show fermix/openai"

    no_keyring.config_file.write_text("")  # fixed
    prompts = Script("", "", "", "", "", "")
    run(no_keyring, prompts)
    assert "Choice [3]: " in prompts.prompts
    assert "Command that prints the secret (no shell) [pass show fermix/openai]: " in (
        prompts.prompts
    )
    assert openai_block(no_keyring)["api_key"] == {
        "source": "command",
        "command": ["pass", "show", "fermix/openai"],
    }
