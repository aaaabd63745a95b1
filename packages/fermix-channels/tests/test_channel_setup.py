"""The channel steps of ``fermix setup`` through core's real ``run_setup``: real config.toml,
an in-memory keyring (``fermix_home``), the first-party plugins from their entry points."""

from __future__ import annotations

import keyring
import pytest
import tomlkit
from fermix_core.boot import assemble
from fermix_core.secrets import KEYRING_ACCOUNT, keyring_service
from fermix_core.setup import SetupInputError, SetupIO, parse_step_args, run_setup


def setup(home, *args, only=("whatsapp",), io=None, reconfigure=False):
    assembly = assemble(home, environ={"FERMIX_HOME": str(home.path)})
    options = parse_step_args(assembly, list(args))
    if reconfigure:
        options["--reconfigure"] = True
    return run_setup(assembly, interactive=io is not None, options=options, io=io, only=only)


def section(home, name="whatsapp") -> dict:
    return tomlkit.parse(home.config_file.read_text()).unwrap()["fermix_channels"][name]


class Script:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise AssertionError(f"unexpected prompt {prompt!r}")
        return self.answers.pop(0)


WHATSAPP_FLAGS = (
    "--whatsapp-phone-number-id", "106540352242922",
    "--whatsapp-access-token", "EAAG-secret-token",
    "--whatsapp-app-secret", "app-secret-value",
    "--whatsapp-verify-token", "verify-me",
    "--whatsapp-owner", "15551230001",
    "--whatsapp-allow", "15551230002, 15551230003",
)  # fmt: skip


def test_flags_configure_whatsapp_with_secrets_in_the_keyring(fermix_home) -> None:
    result = setup(fermix_home, *WHATSAPP_FLAGS)
    assert result.written
    wa = section(fermix_home)
    assert wa["enabled"] is True
    assert wa["phone_number_id"] == "106540352242922"
    assert wa["owner_user_id"] == "15551230001"
    assert wa["allowed_sender_ids"] == ["15551230002", "15551230003"]
    for key in ("access_token", "app_secret", "verify_token"):
        assert wa[key] == "@keyring"
    text = fermix_home.config_file.read_text()
    assert "EAAG-secret-token" not in text and "app-secret-value" not in text
    stored = keyring.get_password(keyring_service("WHATSAPP_ACCESS_TOKEN"), KEYRING_ACCOUNT)
    assert stored == "EAAG-secret-token"
    assert any("fermix restart" in note for note in result.notes)


def test_without_its_flags_a_non_interactive_run_leaves_the_channel_alone(fermix_home) -> None:
    result = setup(fermix_home)
    assert not fermix_home.config_file.exists() or "whatsapp" not in (
        fermix_home.config_file.read_text()
    )
    assert result.steps == ["whatsapp"]


def test_a_missing_value_names_its_flag(fermix_home) -> None:
    with pytest.raises(SetupInputError, match="--whatsapp-app-secret"):
        setup(fermix_home, "--whatsapp-enable", "--whatsapp-phone-number-id", "1",
              "--whatsapp-access-token", "t")  # fmt: skip
    assert not fermix_home.config_file.exists()


def test_a_channel_that_would_serve_nobody_is_refused(fermix_home) -> None:
    args = [a for a in WHATSAPP_FLAGS[:8]]
    with pytest.raises(SetupInputError, match="would serve nobody"):
        setup(fermix_home, *args)


def test_interactive_setup_explains_the_platform_and_reconfigure_keeps_secrets(
    fermix_home,
) -> None:
    shown: list[str] = []
    prompts = Script("y", "106540352242922", "15551230001", "")
    secrets = Script("EAAG-first", "first-secret", "first-verify")
    setup(fermix_home, io=SetupIO(prompt=prompts, secret_prompt=secrets, echo=shown.append))
    explained = "\n".join(shown)
    assert "public HTTPS URL" in explained and "/webhook/whatsapp" in explained
    wa = section(fermix_home)
    assert wa["enabled"] and wa["owner_user_id"] == "15551230001"
    assert wa["allowed_sender_ids"] == []

    # Again without --reconfigure: it says so and asks nothing.
    shown.clear()
    setup(fermix_home, io=SetupIO(prompt=Script(), secret_prompt=Script(), echo=shown.append))
    assert any("--reconfigure" in line for line in shown)

    # --reconfigure: current values are the defaults, Enter keeps each stored secret.
    prompts = Script("", "", "", "15551230009")
    secrets = Script("", "rotated-secret", "")
    setup(
        fermix_home,
        io=SetupIO(prompt=prompts, secret_prompt=secrets, echo=shown.append),
        reconfigure=True,
    )
    wa = section(fermix_home)
    assert wa["phone_number_id"] == "106540352242922"
    assert wa["allowed_sender_ids"] == ["15551230009"]
    assert any("Enter keeps" in p for p in secrets.prompts)
    service = keyring_service("WHATSAPP_APP_SECRET")
    assert keyring.get_password(service, KEYRING_ACCOUNT) == "rotated-secret"
    token = keyring.get_password(keyring_service("WHATSAPP_ACCESS_TOKEN"), KEYRING_ACCOUNT)
    assert token == "EAAG-first"


def test_disable_turns_the_channel_off(fermix_home) -> None:
    setup(fermix_home, *WHATSAPP_FLAGS)
    setup(fermix_home, "--whatsapp-disable")
    assert section(fermix_home)["enabled"] is False


TELEGRAM_TOKEN = "123456789:AAH-setup-test-token-value-000000000"


def test_flags_configure_telegram_with_the_token_in_the_keyring(fermix_home) -> None:
    result = setup(
        fermix_home,
        "--telegram-bot-token", TELEGRAM_TOKEN,
        "--telegram-owner", "4242001",
        only=("telegram",),
    )  # fmt: skip
    assert result.written
    tg = section(fermix_home, "telegram")
    assert tg["enabled"] is True
    assert tg["bot_token"] == "@keyring"
    assert tg["owner_user_id"] == "4242001"
    assert TELEGRAM_TOKEN not in fermix_home.config_file.read_text()
    stored = keyring.get_password(keyring_service("TELEGRAM_BOT_TOKEN"), KEYRING_ACCOUNT)
    assert stored == TELEGRAM_TOKEN


def test_telegram_adapter_reads_the_token_setup_stored(fermix_home, monkeypatch) -> None:
    """The adapter resolves "@keyring" from the slot setup wrote, never from the env."""
    import anyio
    from fermix_channels.telegram.adapter import TelegramChannel
    from fermix_channels.telegram.config import TelegramConfig

    setup(fermix_home, "--telegram-bot-token", TELEGRAM_TOKEN, "--telegram-owner", "1",
          only=("telegram",))  # fmt: skip
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "999:AAfrom-the-environment-must-not-win-000")
    channel = TelegramChannel(TelegramConfig(bot_token="@keyring", owner_user_id="1"))
    assert anyio.run(channel._token) == TELEGRAM_TOKEN


def test_telegram_step_interactive_explains_botfather(fermix_home) -> None:
    prompts, secrets, shown = Script("y", "4242001", ""), Script(TELEGRAM_TOKEN), []
    setup(fermix_home, io=SetupIO(prompt=prompts, secret_prompt=secrets, echo=shown.append),
          only=("telegram",))  # fmt: skip
    assert any("@BotFather" in line for line in shown)
    assert section(fermix_home, "telegram")["bot_token"] == "@keyring"


@pytest.mark.parametrize(
    ("channel", "flags", "expected"),
    [
        ("telegram", ["--telegram-bot-token", "123:ABC", "--telegram-owner", "123456789"],
         {"bot_token": "@keyring", "owner_user_id": "123456789"}),
        ("discord", ["--discord-bot-token", "MTIz.x", "--discord-owner", "80351110224678912"],
         {"bot_token": "@keyring", "owner_user_id": "80351110224678912"}),
        ("signal", ["--signal-account", "+15550001111", "--signal-owner", "+15551230001"],
         {"account": "+15550001111", "owner_user_id": "+15551230001"}),
    ],
)  # fmt: skip
def test_the_other_channels_follow_the_same_shape(fermix_home, channel, flags, expected) -> None:
    setup(fermix_home, *flags, only=(channel,))
    written = section(fermix_home, channel)
    assert written["enabled"] is True
    for key, value in expected.items():
        assert written[key] == value
    assert "cli_path" not in written and "bot_user_id" not in written


def test_a_failed_run_remembers_the_yes_and_the_next_run_offers_it(fermix_home) -> None:
    from fermix_core import setup_answers
    from fermix_core.setup import SetupError

    fermix_home.ensure()
    fermix_home.config_file.write_text("[fermix_core]\nno_such_key = 1\n")  # will not validate
    fermix_home.config_file.chmod(0o600)
    answers = ("y", "106540352242922", "15551230001", "")
    secrets = ("EAAG-first", "first-secret", "first-verify")
    io = SetupIO(prompt=Script(*answers), secret_prompt=Script(*secrets), echo=[].append)
    with pytest.raises(SetupError, match="nothing was written"):
        setup(fermix_home, io=io)
    kept = setup_answers.load(fermix_home)
    assert kept["whatsapp: set up"] == "y"
    assert not set(secrets) & set(kept.values())  # secrets are asked again, never kept

    fermix_home.config_file.write_text("")  # fixed
    prompts = Script("", "", "", "")
    setup(fermix_home, io=SetupIO(prompt=prompts, secret_prompt=Script(*secrets), echo=[].append))
    assert prompts.prompts[0] == "Set up WhatsApp? [y]: "
    assert section(fermix_home)["enabled"] is True
    assert section(fermix_home)["owner_user_id"] == "15551230001"
    assert not setup_answers.kept(fermix_home)


def test_a_remembered_no_is_offered_and_enter_keeps_it(fermix_home) -> None:
    from fermix_core import setup_answers

    setup_answers.keep(fermix_home, {"whatsapp: set up": "n"})
    prompts = Script("")
    setup(fermix_home, io=SetupIO(prompt=prompts, secret_prompt=Script(), echo=[].append))
    assert prompts.prompts == ["Set up WhatsApp? [n]: "]
    assert not fermix_home.config_file.exists() or "whatsapp" not in (
        fermix_home.config_file.read_text()
    )
