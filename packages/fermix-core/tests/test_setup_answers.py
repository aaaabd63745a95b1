"""An interactive ``fermix setup`` that fails keeps its answers (never secrets) for the
next run, which offers them as defaults; a run that finishes forgets them."""

from __future__ import annotations

import json
import stat

import pytest
import tomlkit
from fermix_core import setup_answers
from fermix_core.boot import assemble
from fermix_core.home import FermixHome
from fermix_core.setup import SetupContext, SetupError, SetupIO, run_setup


class Script:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise AssertionError(f"unexpected prompt {prompt!r}")
        return self.answers.pop(0)


def interactive(home: FermixHome, *answers: str) -> tuple[Script, list[str]]:
    prompts, shown = Script(*answers), []
    io = SetupIO(prompt=prompts, secret_prompt=Script(), echo=shown.append)
    assembly = assemble(home, environ={"FERMIX_HOME": str(home.path)}, entry_points=False)
    run_setup(assembly, interactive=True, options={}, io=io)
    return prompts, shown


def break_config(home: FermixHome) -> None:
    # A key no model knows: the run's result does not validate, so nothing is written.
    home.ensure()
    home.config_file.write_text("[fermix_core]\nno_such_key = 1\n")
    home.config_file.chmod(0o600)


def test_a_failed_run_keeps_its_answers_and_the_rerun_offers_them(fermix_home) -> None:
    break_config(fermix_home)
    with pytest.raises(SetupError, match="nothing was written"):
        interactive(fermix_home, "Ada", "Europe/Paris", "terse, no emoji", "Friday")
    assert "no_such_key" in fermix_home.config_file.read_text()  # untouched
    assert not (fermix_home.memory_dir / "main" / "USER.md").exists()
    kept = fermix_home.path / setup_answers.FILE_NAME
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert json.loads(kept.read_text())["answers"] == {
        "--user-name": "Ada",
        "--timezone": "Europe/Paris",
        "--communication-style": "terse, no emoji",
        "--agent-name": "Friday",
    }

    fermix_home.config_file.write_text("")  # the operator fixes the file
    prompts, shown = interactive(fermix_home, "", "", "", "")
    assert setup_answers.OFFERED_NOTE in shown
    assert prompts.prompts == [
        "Your name (how the assistant addresses you) [Ada]: ",
        "Your timezone [Europe/Paris]: ",
        "How you like replies (e.g. terse, no emoji) [terse, no emoji]: ",
        "The assistant's name [Friday]: ",
    ]
    agent = tomlkit.parse(fermix_home.config_file.read_text()).unwrap()["fermix_core"]["agent"]
    assert agent["user_name"] == "Ada" and agent["name"] == "Friday"
    assert not kept.exists()  # finished: nothing is offered a third time


def test_a_typed_answer_replaces_the_kept_one(fermix_home) -> None:
    break_config(fermix_home)
    with pytest.raises(SetupError):
        interactive(fermix_home, "Ada", "", "", "")
    with pytest.raises(SetupError):
        interactive(fermix_home, "Grace", "", "", "")
    assert setup_answers.load(fermix_home)["--user-name"] == "Grace"


def test_a_kept_answer_that_is_refused_is_not_offered_again(fermix_home) -> None:
    setup_answers.keep(fermix_home, {"--timezone": "Atlantis/Capital"})
    prompts, _ = interactive(fermix_home, "Ada", "", "", "", "")
    assert prompts.prompts[1] == "Your timezone [Atlantis/Capital]: "
    assert prompts.prompts[2] == "Your timezone [America/New_York]: "


def test_secrets_are_never_kept(fermix_home) -> None:
    assembly = assemble(
        fermix_home, environ={"FERMIX_HOME": str(fermix_home.path)}, entry_points=False
    )
    hidden = Script("sk-proj-abcdefghijklmnopqrstuvwxyz0123456789")
    visible = Script("sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789", "Ada")
    context = SetupContext(
        assembly,
        tomlkit.document(),
        True,
        {},
        SetupIO(prompt=visible, secret_prompt=hidden, echo=lambda _t: None),
    )
    context.remembered = {"--api-key": "sk-proj-kept-somehow-0123456789abcdef"}
    assert context.ask("--api-key", "API key", default="", secret=True).startswith("sk-proj-")
    assert hidden.prompts == ["API key: "]  # a secret is never offered in brackets either
    context.ask("--base-url", "Base URL", default="")  # pasted a key in the wrong place
    context.ask("--user-name", "Your name", default="")
    assert context.answers == {"--user-name": "Ada"}
    setup_answers.keep(fermix_home, {**context.answers, "--api-key": "sk-proj-x0123456789abcdef"})
    assert "sk-" not in (fermix_home.path / setup_answers.FILE_NAME).read_text()


def test_a_non_interactive_failure_writes_nothing(fermix_home) -> None:
    break_config(fermix_home)
    assembly = assemble(
        fermix_home, environ={"FERMIX_HOME": str(fermix_home.path)}, entry_points=False
    )
    with pytest.raises(SetupError):
        run_setup(assembly, interactive=False, options={"--user-name": "Ada"})
    assert not (fermix_home.path / setup_answers.FILE_NAME).exists()


@pytest.mark.parametrize("content", ["", "{", json.dumps({"format": 7, "answers": {"--x": "y"}})])
def test_an_unreadable_answers_file_offers_nothing(fermix_home, content) -> None:
    fermix_home.ensure()
    (fermix_home.path / setup_answers.FILE_NAME).write_text(content)
    assert setup_answers.load(fermix_home) == {}
