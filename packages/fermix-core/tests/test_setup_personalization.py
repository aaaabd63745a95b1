"""The personalization step through core's real ``run_setup``: real config, real prompt files."""

from __future__ import annotations

import pytest
import tomlkit
from fermix_core.boot import assemble
from fermix_core.home import FermixHome
from fermix_core.prompt import SEED_RECORD, prompt_files, template_drift
from fermix_core.setup import SetupError, SetupInputError, SetupIO, parse_step_args, run_setup
from fermix_core.setup_personalization import (
    PERSONALIZATION_STEP,
    canonical_timezone,
)

ALL_FILES = sorted(prompt_files())


def make_assembly(home: FermixHome):
    assembly = assemble(
        home,
        environ={"FERMIX_HOME": str(home.path)},
        entry_points=False,  # core's built-in plugin registers the step
    )
    assert assembly.registry.errors == []
    return assembly


def setup(home: FermixHome, *args: str, io: SetupIO | None = None):
    assembly = make_assembly(home)
    options = parse_step_args(assembly, list(args))
    return run_setup(assembly, interactive=io is not None, options=options, io=io)


def agent(home: FermixHome) -> dict:
    data = tomlkit.parse(home.config_file.read_text()).unwrap()
    return data["fermix_core"]["agent"]


def write_config(home: FermixHome, text: str) -> None:
    home.config_file.write_text(text)
    home.config_file.chmod(0o600)


def read(home: FermixHome, relative: str) -> str:
    return (home.path / relative).read_text()


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


def scripted(*answers: str) -> tuple[SetupIO, Script, list[str]]:
    prompts = Script(*answers)
    shown: list[str] = []
    return SetupIO(prompt=prompts, secret_prompt=Script(), echo=shown.append), prompts, shown


# --------------------------------------------------------------------------- the record


def test_the_step_record_is_sound_and_declares_its_flags() -> None:
    assert PERSONALIZATION_STEP.problems() == []
    assert (PERSONALIZATION_STEP.name, PERSONALIZATION_STEP.order) == ("personalization", 200)
    assert PERSONALIZATION_STEP.label == "About you"
    flags = [o.flag for o in PERSONALIZATION_STEP.options]
    assert flags == ["--user-name", "--timezone", "--communication-style", "--agent-name"]
    assert not any(o.secret or o.is_bool for o in PERSONALIZATION_STEP.options)


# --------------------------------------------------------------------------- non-interactive


def test_flags_are_written_to_config_and_seed_the_prompt_files(fermix_home) -> None:
    result = setup(
        fermix_home,
        "--user-name",
        "Ada Lovelace",
        "--timezone",
        "Europe/Berlin",
        "--communication-style",
        "terse, no emoji",
        "--agent-name=Jarvis",
    )
    assert result.written
    assert "personalization" in result.steps
    assert agent(fermix_home) == {
        "user_name": "Ada Lovelace",
        "timezone": "Europe/Berlin",
        "communication_style": "terse, no emoji",
        "name": "Jarvis",
    }
    for relative in ALL_FILES:
        assert (fermix_home.path / relative).is_file(), relative
    user = read(fermix_home, "memory/main/USER.md")
    assert "**Name:** Ada Lovelace" in user
    assert "**Timezone:** Europe/Berlin" in user
    assert "**Communication style:** terse, no emoji" in user
    assert "**Name:** Jarvis" in read(fermix_home, "bootstrap/main/IDENTITY.md")
    seeded_note = next(n for n in result.notes if n.startswith("Seeded prompt files: "))
    assert sorted(seeded_note.removeprefix("Seeded prompt files: ").split(", ")) == ALL_FILES
    assert (fermix_home.path / SEED_RECORD).is_file()
    assert template_drift(fermix_home) == []
    loaded = make_assembly(fermix_home).load_config().core.fermix_core.agent
    assert (loaded.name, loaded.timezone, loaded.user_name) == (
        "Jarvis",
        "Europe/Berlin",
        "Ada Lovelace",
    )


def test_no_flags_writes_the_defaults_and_still_seeds(fermix_home) -> None:
    result = setup(fermix_home)
    assert agent(fermix_home) == {"timezone": "America/New_York", "name": "fermix"}
    assert "**Name:** fermix" in read(fermix_home, "bootstrap/main/IDENTITY.md")
    user = read(fermix_home, "memory/main/USER.md")
    assert "**Name:** not set yet" in user
    assert "**Timezone:** America/New_York" in user
    assert any(n.startswith("Seeded prompt files: ") for n in result.notes)


def test_a_rerun_keeps_config_values_comments_and_edited_prompt_files(fermix_home) -> None:
    write_config(
        fermix_home,
        "[fermix_core.agent]\n"
        'name = "Jarvis"  # named after the butler\n'
        'timezone = "Asia/Tokyo"\n'
        'user_name = "Ada"\n',
    )
    first = setup(fermix_home)
    assert not first.written  # every value was already there: nothing to change
    assert "# named after the butler" in fermix_home.config_file.read_text()
    assert "**Name:** Jarvis" in read(fermix_home, "bootstrap/main/IDENTITY.md")
    assert "**Timezone:** Asia/Tokyo" in read(fermix_home, "memory/main/USER.md")

    soul = fermix_home.path / "bootstrap/main/SOUL.md"
    soul.write_bytes(b"my own soul\r\n")
    (fermix_home.path / "memory/main/MEMORY.md").unlink()
    second = setup(fermix_home, "--user-name", "Grace")
    assert soul.read_bytes() == b"my own soul\r\n"
    assert agent(fermix_home) == {
        "name": "Jarvis",
        "timezone": "Asia/Tokyo",
        "user_name": "Grace",
    }
    assert "Seeded prompt files: memory/main/MEMORY.md" in second.notes
    # USER.md exists already, so the new name does not reach it; the user is told why.
    assert "**Name:** Ada" in read(fermix_home, "memory/main/USER.md")
    assert any("USER.md already exists and was not changed" in n for n in second.notes)


def test_renaming_the_assistant_leaves_identity_to_the_boot_reconciler(fermix_home) -> None:
    setup(fermix_home, "--agent-name", "Jarvis")
    identity = fermix_home.path / "bootstrap/main/IDENTITY.md"
    before = identity.read_bytes()
    result = setup(fermix_home, "--agent-name", "Friday")
    assert agent(fermix_home)["name"] == "Friday"
    assert identity.read_bytes() == before
    assert "Prompt files already exist; kept as they are" in result.notes
    assert any("now called 'Friday'" in n and "fermix restart" in n for n in result.notes)


def test_an_empty_flag_clears_an_optional_value(fermix_home) -> None:
    write_config(
        fermix_home,
        '[fermix_core.agent]\nuser_name = "Ada"\ncommunication_style = "chatty"\n',
    )
    setup(fermix_home, "--user-name=", "--communication-style", "   ")
    assert "user_name" not in agent(fermix_home)
    assert "communication_style" not in agent(fermix_home)


def test_timezone_case_is_corrected_to_the_iana_key(fermix_home) -> None:
    setup(fermix_home, "--timezone", "  europe/berlin ")
    assert agent(fermix_home)["timezone"] == "Europe/Berlin"
    assert canonical_timezone("UTC") == "UTC"


@pytest.mark.parametrize(
    "value",
    ["Mars/Olympus_Mons", "../../etc/passwd", "/etc/localtime", "America", "", "Europe/Berlin\x00"],
)
def test_an_unknown_timezone_flag_is_refused_before_anything_is_written(
    fermix_home, value: str
) -> None:
    with pytest.raises(SetupInputError) as info:
        setup(fermix_home, "--timezone", value)
    assert str(info.value).startswith("--timezone: unknown timezone")
    assert "America/New_York" in str(info.value)
    assert not fermix_home.config_file.exists()
    assert not (fermix_home.path / "bootstrap").exists()


@pytest.mark.parametrize(
    ("args", "flag", "message"),
    [
        (("--user-name", "Ada\x1b[2J"), "--user-name", "control characters"),
        (("--user-name", "x" * 101), "--user-name", "keep it under 100"),
        (("--communication-style", "y" * 501), "--communication-style", "keep it under 500"),
        (("--agent-name", ""), "--agent-name", "needs a name"),
        (("--agent-name", "\t \n"), "--agent-name", "needs a name"),
    ],
)
def test_hostile_values_are_refused_against_their_flag(
    fermix_home, args: tuple[str, ...], flag: str, message: str
) -> None:
    with pytest.raises(SetupInputError) as info:
        setup(fermix_home, *args)
    assert str(info.value).startswith(f"{flag}: ")
    assert message in str(info.value)
    assert not fermix_home.config_file.exists()


def test_newlines_in_a_value_cannot_break_the_prompt_files(fermix_home) -> None:
    setup(
        fermix_home,
        "--user-name",
        "Ada\n# Injected heading",
        "--communication-style",
        "short\r\n\r\n- **Name:** Mallory",
    )
    assert agent(fermix_home)["user_name"] == "Ada # Injected heading"
    user = read(fermix_home, "memory/main/USER.md")
    assert "\n# Injected heading" not in user
    lines = user.splitlines()
    assert [line for line in lines if line.startswith("- **Name:**")] == [
        "- **Name:** Ada # Injected heading"
    ]
    assert "- **Communication style:** short - **Name:** Mallory" in lines


def test_a_broken_stored_timezone_is_not_kept_silently(fermix_home) -> None:
    write_config(fermix_home, '[fermix_core.agent]\ntimezone = "Mars/Base"\n')
    before = fermix_home.config_file.read_text()
    with pytest.raises(SetupInputError) as info:
        setup(fermix_home)
    assert "[fermix_core.agent] timezone" in str(info.value)
    assert "pass --timezone VALUE" in str(info.value)
    assert fermix_home.config_file.read_text() == before
    # The flag replaces it.
    setup(fermix_home, "--timezone", "Europe/Oslo")
    assert agent(fermix_home)["timezone"] == "Europe/Oslo"


def test_agent_that_is_not_a_table_is_reported_with_the_fix(fermix_home) -> None:
    write_config(fermix_home, '[fermix_core]\nagent = "Jarvis"\n')
    with pytest.raises(SetupError) as info:
        setup(fermix_home, "--user-name", "Ada")
    assert "fermix_core.agent in config.toml is a string, not a table" in str(info.value)
    assert "fermix config unset fermix_core.agent" in str(info.value)
    assert not (fermix_home.path / "bootstrap").exists()


def test_an_unwritable_prompt_location_is_a_setup_error_not_a_crash(fermix_home) -> None:
    (fermix_home.path / "bootstrap").write_text("not a directory")
    with pytest.raises(SetupError) as info:
        setup(fermix_home, "--user-name", "Ada")
    # Prompt files are written only after config.toml, and the error says exactly that.
    assert str(info.value).startswith("config.toml was written, but cannot write the prompt")
    assert "run `fermix setup` again" in str(info.value)
    assert agent(fermix_home)["user_name"] == "Ada"


# --------------------------------------------------------------------------- interactive


def test_interactive_answers_are_recorded_and_defaults_are_offered(fermix_home) -> None:
    io, prompts, shown = scripted("Ada", "", "warm but brief", "")
    result = setup(fermix_home, io=io)
    assert agent(fermix_home) == {
        "user_name": "Ada",
        "timezone": "America/New_York",
        "communication_style": "warm but brief",
        "name": "fermix",
    }
    assert prompts.prompts == [
        "Your name (how the assistant addresses you): ",
        "Your timezone [America/New_York]: ",
        "How you like replies (e.g. terse, no emoji): ",
        "The assistant's name [fermix]: ",
    ]
    assert "== About you ==" in shown
    assert any(n.startswith("Seeded prompt files: ") for n in result.notes)


def test_interactive_rerun_offers_what_config_holds(fermix_home) -> None:
    write_config(
        fermix_home,
        '[fermix_core.agent]\nname = "Jarvis"\ntimezone = "Asia/Tokyo"\nuser_name = "Ada"\n',
    )
    io, prompts, _ = scripted("", "", "", "")
    result = setup(fermix_home, io=io)
    assert not result.written
    assert prompts.prompts[0] == "Your name (how the assistant addresses you) [Ada]: "
    assert prompts.prompts[1] == "Your timezone [Asia/Tokyo]: "
    assert prompts.prompts[3] == "The assistant's name [Jarvis]: "


def test_interactive_bad_answers_are_asked_again(fermix_home) -> None:
    io, prompts, shown = scripted("Ada", "Nowhere/Town", "asia/KOLKATA", "", "Friday")
    setup(fermix_home, io=io)
    assert agent(fermix_home)["timezone"] == "Asia/Kolkata"
    assert agent(fermix_home)["name"] == "Friday"
    assert any('unknown timezone "Nowhere/Town"' in line for line in shown)
    assert prompts.prompts.count("Your timezone [America/New_York]: ") == 2


def test_interactive_gives_up_after_repeated_bad_answers(fermix_home) -> None:
    io, _, _ = scripted("Ada", *["Atlantis"] * 5)
    with pytest.raises(SetupError) as info:
        setup(fermix_home, io=io)
    assert "no usable answer for 'Your timezone'" in str(info.value)
    assert not fermix_home.config_file.exists()


def test_interactive_replaces_a_broken_stored_timezone_with_a_visible_default(
    fermix_home,
) -> None:
    write_config(fermix_home, '[fermix_core.agent]\ntimezone = "Mars/Base"\n')
    io, prompts, shown = scripted("", "", "", "")
    setup(fermix_home, io=io)
    assert any("timezone = 'Mars/Base', which is not usable" in line for line in shown)
    assert prompts.prompts[1] == "Your timezone [America/New_York]: "
    assert agent(fermix_home)["timezone"] == "America/New_York"


def test_flags_win_over_prompts_in_an_interactive_run(fermix_home) -> None:
    io, prompts, _ = scripted("", "")
    setup(fermix_home, "--user-name", "Ada", "--timezone", "UTC", io=io)
    assert len(prompts.prompts) == 2  # style and agent name only
    assert agent(fermix_home)["user_name"] == "Ada"
    assert agent(fermix_home)["timezone"] == "UTC"
