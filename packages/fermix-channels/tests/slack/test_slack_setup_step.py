"""The slack setup step through core's real ``run_setup``: real config.toml, real keyring."""

from __future__ import annotations

from typing import Any

import fermix_channels.slack.plugin as plugin
import keyring
import pytest
import tomlkit
from fermix_core.boot import assemble
from fermix_core.home import FermixHome
from fermix_core.secrets import KEYRING_ACCOUNT, keyring_service
from fermix_core.setup import SetupInputError, SetupIO, parse_step_args, run_setup


def setup(
    home: FermixHome, *args: str, io: SetupIO | None = None, reconfigure: bool = False
) -> Any:
    env = {"FERMIX_HOME": str(home.path)}
    assembly = assemble(home, environ=env, plugins=[("channels.slack", plugin)], entry_points=False)
    assert assembly.registry.errors == []
    options = parse_step_args(assembly, list(args))
    if reconfigure:  # `fermix setup --reconfigure` is a command option, not a step flag
        options["--reconfigure"] = True
    return run_setup(
        assembly, interactive=io is not None, options=options, io=io, only=("home", "slack")
    )


def section(home: FermixHome) -> dict[str, Any]:
    return tomlkit.parse(home.config_file.read_text()).unwrap()["fermix_channels"]["slack"]


def stored(env: str) -> str | None:
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


def test_flags_enable_events_mode_and_move_the_tokens_to_the_keyring(fermix_home) -> None:
    result = setup(
        fermix_home,
        "--slack-bot-token",
        "xoxb-123-abc",
        "--slack-signing-secret",
        "8f742231b10e",
        "--slack-owner-id",
        "u012ab3cd",
    )
    slack = section(fermix_home)
    assert slack["enabled"] is True and slack["mode"] == "events"
    assert slack["owner_user_id"] == "U012AB3CD"
    assert slack["bot_token"] == "@keyring" and slack["signing_secret"] == "@keyring"
    assert stored("SLACK_BOT_TOKEN") == "xoxb-123-abc"
    assert stored("SLACK_SIGNING_SECRET") == "8f742231b10e"
    assert "xoxb-123-abc" not in fermix_home.config_file.read_text()
    assert any("/webhook/slack" in note for note in result.notes)


def test_socket_mode_takes_the_app_token(fermix_home) -> None:
    setup(
        fermix_home,
        "--slack-mode",
        "socket",
        "--slack-bot-token",
        "xoxb-1",
        "--slack-app-token",
        "xapp-1-A-1-zz",
        "--slack-allowed-user-ids",
        "U0AAA1,U0BBB2",
    )
    slack = section(fermix_home)
    assert (slack["mode"], slack["app_token"]) == ("socket", "@keyring")
    assert slack["allowed_user_ids"] == ["U0AAA1", "U0BBB2"]
    assert stored("SLACK_APP_TOKEN") == "xapp-1-A-1-zz"


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--slack-bot-token", "xoxp-user-token"), "--slack-bot-token"),
        (("--slack-mode", "webhook"), "--slack-mode"),
        (("--slack-mode", "socket", "--slack-app-token", "xoxb-1"), "--slack-app-token"),
        (("--slack-owner-id", "alice"), "--slack-owner-id"),
    ],
)
def test_bad_values_are_refused_against_their_flag(fermix_home, args, flag) -> None:
    with pytest.raises(SetupInputError, match=flag):
        setup(fermix_home, *args)
    assert (
        not fermix_home.config_file.exists() or "slack" not in fermix_home.config_file.read_text()
    )


def test_a_scripted_run_without_slack_flags_leaves_slack_alone(fermix_home) -> None:
    setup(fermix_home)
    text = fermix_home.config_file.read_text() if fermix_home.config_file.exists() else ""
    assert "slack" not in text


def test_missing_tokens_are_named_in_the_notes(fermix_home) -> None:
    result = setup(fermix_home, "--slack-mode", "events", "--slack-owner-id", "U0OWNER1")
    notes = " ".join(result.notes)
    assert "--slack-bot-token" in notes and "--slack-signing-secret" in notes


def test_a_channel_that_would_serve_nobody_is_refused(fermix_home) -> None:
    with pytest.raises(SetupInputError, match="--slack-owner-id"):
        setup(fermix_home, "--slack-bot-token", "xoxb-1")
    text = fermix_home.config_file.read_text() if fermix_home.config_file.exists() else ""
    assert "slack" not in text


def test_disable_keeps_the_tokens(fermix_home) -> None:
    setup(fermix_home, "--slack-bot-token", "xoxb-1", "--slack-owner-id", "U0OWNER1")
    setup(fermix_home, "--slack-disable")
    slack = section(fermix_home)
    assert slack["enabled"] is False and slack["bot_token"] == "@keyring"


def test_interactive_explains_the_app_and_keeps_what_is_set(fermix_home) -> None:
    shown: list[str] = []
    prompts = Script("y", "", "U0OWNER1", "")
    secrets = Script("xoxb-typed", "shh-secret")
    setup(fermix_home, io=SetupIO(prompt=prompts, secret_prompt=secrets, echo=shown.append))
    slack = section(fermix_home)
    assert slack["mode"] == "events" and slack["owner_user_id"] == "U0OWNER1"
    assert stored("SLACK_BOT_TOKEN") == "xoxb-typed"
    assert any("chat:write" in line and "im:history" in line for line in shown)

    # Set up already: a plain interactive run leaves it alone (nothing is asked) ...
    setup(fermix_home, io=SetupIO(prompt=Script(), secret_prompt=Script(), echo=shown.append))
    assert any("--reconfigure --step slack" in line for line in shown)
    # ... and --reconfigure asks again: Enter keeps every token, only the owner changes.
    prompts = Script("", "U0OTHER1", "")
    secrets = Script("", "")
    io = SetupIO(prompt=prompts, secret_prompt=secrets, echo=shown.append)
    setup(fermix_home, io=io, reconfigure=True)
    assert prompts.prompts[0].startswith("Mode")
    assert section(fermix_home)["owner_user_id"] == "U0OTHER1"
    assert stored("SLACK_BOT_TOKEN") == "xoxb-typed"


def test_interactive_no_means_no(fermix_home) -> None:
    setup(fermix_home, io=SetupIO(prompt=Script("n"), secret_prompt=Script(), echo=lambda _: None))
    text = fermix_home.config_file.read_text() if fermix_home.config_file.exists() else ""
    assert "slack" not in text


@pytest.fixture
def no_keyring(fermix_home):
    import keyring.backends.fail

    previous = keyring.get_keyring()
    keyring.set_keyring(keyring.backends.fail.Keyring())
    try:
        yield fermix_home
    finally:
        keyring.set_keyring(previous)


def test_without_a_keyring_a_plain_token_needs_consent(no_keyring) -> None:
    owner = ("--slack-owner-id", "U0OWNER1")
    with pytest.raises(SetupInputError, match="--slack-bot-token-env"):
        setup(no_keyring, "--slack-bot-token", "xoxb-1", *owner)
    text = no_keyring.config_file.read_text() if no_keyring.config_file.exists() else ""
    assert "xoxb-1" not in text
    setup(no_keyring, "--slack-bot-token", "xoxb-1", "--secrets-in-config", *owner)
    assert section(no_keyring)["bot_token"] == "xoxb-1"


def test_tokens_can_be_env_or_command_references(no_keyring) -> None:
    setup(
        no_keyring,
        "--slack-bot-token-env",
        "WORK_SLACK_BOT",
        "--slack-signing-secret-command",
        "pass show fermix/slack-signing",
        "--slack-owner-id",
        "U0OWNER1",
    )
    slack = section(no_keyring)
    assert slack["bot_token"] == {"source": "env", "env": "WORK_SLACK_BOT"}
    assert slack["signing_secret"] == {
        "source": "command",
        "command": ["pass", "show", "fermix/slack-signing"],
    }
