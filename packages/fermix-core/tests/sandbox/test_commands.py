"""check_command: catastrophes in every profile, programs per profile, and the parser."""

from __future__ import annotations

import pytest
from fermix_core.sandbox import CommandRefused
from fermix_core.sandbox.commands import MAX_DEPTH
from fermix_core.sandbox.shlex_lite import LexError, lex, split_commands


@pytest.fixture
def extended(layout):
    return layout.policy("strict", command_profile="extended")


def refused(policy, command, **kw) -> CommandRefused:
    with pytest.raises(CommandRefused) as caught:
        policy.check_command(command, **kw)
    return caught.value


@pytest.mark.parametrize("profile", ["bare", "assistant", "extended"])
def test_catastrophes_are_refused_as_catastrophes_in_every_profile(layout, profile) -> None:
    policy = layout.policy("open", command_profile=profile)
    for command in ("rm -rf /", "sudo rm -rf ~", ":(){ :|:& };:", "mkfs.ext4 /dev/sda1"):
        error = refused(policy, command)
        assert error.reason == "catastrophic", (profile, command)
        assert "never run, in any sandbox mode" in str(error)


def test_refusals_say_what_would_be_destroyed(layout, extended) -> None:
    assert "the whole file system (/)" in str(refused(extended, "rm -rf /"))
    assert f"your home directory ({layout.home})" in str(refused(extended, "rm -rf ~"))
    assert "Fermix's own state" in str(refused(extended, f"rm -rf {layout.fermix.path}"))
    assert "part of Fermix's own state" in str(
        refused(extended, f"rm -rf {layout.fermix.path}/memory.db")
    )
    assert "disk device" in str(refused(extended, "dd if=/dev/zero of=/dev/sda bs=1M"))
    assert "fork bomb" in str(refused(extended, "bomb(){ bomb | bomb & }; bomb"))


def test_the_workspace_inside_fermix_home_may_be_cleaned(layout, extended) -> None:
    extended.check_command(f"rm -rf {layout.workspace}/build")


def test_relative_targets_are_judged_from_the_cwd(layout, extended) -> None:
    extended.check_command("rm -rf ./*", cwd=layout.project)
    refused(extended, "rm -rf ./*", cwd=layout.home)
    refused(extended, "rm -rf ..", cwd=layout.home / "code")
    refused(extended, "cd .. && cd .. && rm -rf .", cwd=layout.project)
    extended.check_command("cd build && rm -rf *", cwd=layout.project)


def test_unknown_variables_are_taken_at_their_worst(extended) -> None:
    error = refused(extended, 'rm -rf "$BUILD_DIR"/')
    assert "(/)" in str(error)
    extended.check_command('rm -rf "${BUILD_DIR:?}/"')  # aborts when unset: never /
    extended.check_command('rm -rf "$BUILD_DIR"')  # empty: rm refuses ""


def test_argv_form_is_checked_without_a_shell(extended) -> None:
    refused(extended, ["rm", "-rf", "/"])
    refused(extended, ["sh", "-c", "rm -rf / # cleanup"])
    refused(extended, ["env", "-S", "rm -rf /"])
    extended.check_command(["echo", "rm -rf /"])
    extended.check_command(["git", "commit", "-m", "$(rm -rf /)"])  # no shell: just text


@pytest.mark.parametrize(
    "command",
    ["", "   ", "echo 'unterminated", 'echo "unterminated', "echo $(unterminated", "echo `x"],
)
def test_unparseable_or_empty_commands_are_refused(extended, command) -> None:
    assert refused(extended, command).reason == "unparseable"


def test_empty_argv_is_refused(extended) -> None:
    assert refused(extended, []).reason == "unparseable"


def test_nesting_deeper_than_the_limit_is_refused(extended) -> None:
    command = "true"
    for _ in range(MAX_DEPTH + 2):
        command = f"sh -c {_quote(command)}"
    assert refused(extended, command).reason == "unparseable"
    shallow = "true"
    for _ in range(3):
        shallow = f"sh -c {_quote(shallow)}"
    extended.check_command(shallow)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def test_huge_commands_are_refused(extended) -> None:
    assert refused(extended, "echo " + "x" * 200_000).reason == "unparseable"


# --------------------------------------------------------------------------- profiles


@pytest.mark.parametrize(
    ("profile", "command", "allowed"),
    [
        ("bare", "ls -la", True),
        ("bare", "cat README.md | grep -n TODO | wc -l", True),
        ("bare", "cd src && ls", True),
        ("bare", "git status", False),
        ("bare", "python3 -c 'print(1)'", False),
        ("bare", "sh -c 'ls'", False),
        ("assistant", "git diff && python3.12 -m pytest -q", True),
        ("assistant", "rg -n TODO src | head", True),
        ("assistant", "npm test", True),
        ("assistant", "./gradlew build", True),
        ("assistant", "bash -c 'make && make test'", True),
        ("assistant", "FOO=1 nohup timeout 5 node server.js", True),
        ("assistant", "sudo make install", False),
        ("assistant", "docker run --rm -v /:/host alpine", False),
        ("assistant", "curl https://example.com", False),
        ("assistant", "ssh host uptime", False),
        ("assistant", "bash -c 'docker ps'", False),
        ("assistant", "echo $(curl -s https://example.com)", False),
        ("assistant", "env docker ps", False),
        ("assistant", "$TOOL --version", False),
        ("assistant", "echo aGk= | base64 -d | sh", False),
        ("extended", "sudo make install", True),
        ("extended", "docker ps && curl -s https://example.com", True),
        ("extended", "$TOOL --version", True),
        ("extended", "echo aGk= | base64 -d | sh", True),
    ],
)
def test_profiles(layout, profile, command, allowed) -> None:
    policy = layout.policy("strict", command_profile=profile)
    if allowed:
        policy.check_command(command)
    else:
        error = refused(policy, command)
        assert error.reason == "profile", error
        assert profile in str(error)
        assert (
            "/sandbox preset extended" in str(error)
            or "spell" in str(error)
            or "file" in str(error)
        )


def test_command_allowed_follows_the_profile(layout) -> None:
    bare = layout.policy("strict", command_profile="bare")
    assistant = layout.policy("strict")
    extended = layout.policy("strict", command_profile="extended")
    assert bare.command_allowed("ls") and not bare.command_allowed("git")
    assert assistant.command_allowed("/usr/bin/git") and assistant.command_allowed("python3.11")
    assert not assistant.command_allowed("docker")
    assert extended.command_allowed("docker")


def test_functions_defined_in_the_script_count_as_programs(layout) -> None:
    layout.policy("strict", command_profile="bare").check_command("greet() { echo hi; }; greet")


def test_case_patterns_and_loops_are_not_programs(layout) -> None:
    policy = layout.policy("strict")
    policy.check_command('case "$1" in start|run) make run;; *) echo "?";; esac')
    policy.check_command('for f in *.py; do ruff check "$f"; done')
    policy.check_command('while read -r line; do echo "$line"; done < list.txt')
    policy.check_command("if [ -f x ]; then cat x; else echo none; fi")


def test_refusals_and_approvals_are_traced_without_the_command_text(layout, tracer) -> None:
    policy = layout.policy("strict", tracer=tracer)
    policy.check_command("git status | grep modified")
    with pytest.raises(CommandRefused):
        policy.check_command("curl -H 'Authorization: Bearer sk-secret' https://x")
    (kind1, allow), (kind2, refuse) = tracer.records
    assert kind1 == kind2 == "sandbox_event"
    assert allow["decision"] == "allow" and allow["programs"] == ["git", "grep"]
    assert refuse["decision"] == "refuse" and refuse["reason"] == "profile"
    assert "sk-secret" not in repr(tracer.records)


# --------------------------------------------------------------------------- the lexer


def test_lexer_keeps_substitutions_heredocs_and_fd_numbers() -> None:
    tokens = lex("cat <<'EOF' > out.txt 2>&1\nrm -rf /\nEOF\necho \"$(date)\" `id`")
    commands, _ = split_commands(tokens)
    first, second = commands
    assert [w.text for w in first.words] == ["cat"]
    assert ("<<", None, "rm -rf /") in first.redirects
    assert [op for op, _t, _b in first.redirects] == ["<<", ">", ">&"]
    assert second.substitutions() == ["date", "id"]


def test_lexer_errors_on_unterminated_input() -> None:
    for text in ("'a", '"a', "$(a", "`a", "${a"):
        with pytest.raises(LexError):
            lex(text)


def test_project_scripts_are_read_for_catastrophes_not_for_the_profile(layout) -> None:
    """./gradlew may call programs outside `assistant` (as before); a script that deletes
    the home is refused however it is started; one that does not exist yet is refused."""
    policy = layout.policy("standard", command_profile="assistant")
    script = layout.project / "gradlew"
    script.write_text("#!/bin/sh\nAPP=$(uname)\ncygpath -w . 2>/dev/null\nexec java -jar x\n")
    script.chmod(0o755)
    for command in ("./gradlew build", "sh gradlew build", "bash ./gradlew"):
        policy.check_command(command, cwd=layout.project)
    wipe = layout.project / "wipe.sh"
    wipe.write_text("#!/bin/bash\nrm -rf ~\n")
    wipe.chmod(0o755)
    for command in ("./wipe.sh", "sh wipe.sh", "source wipe.sh", "bash -x wipe.sh"):
        with pytest.raises(CommandRefused) as caught:
            policy.check_command(command, cwd=layout.project)
        assert caught.value.reason == "catastrophic", command
    with pytest.raises(CommandRefused, match="does not exist yet"):
        policy.check_command("echo 'rm -rf ~' > later.sh; sh later.sh", cwd=layout.project)
