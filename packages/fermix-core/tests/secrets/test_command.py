"""``{ source = "command" }`` helpers, run as real subprocesses."""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.secrets import ResolvedSecret, SecretResolver, run_secret_command

PATH = ("fermix_core", "providers", "openai", "api_key")


def command(*argv: str, **extra: object) -> dict[str, object]:
    return {"source": "command", "command": list(argv), **extra}


def test_stdout_is_the_secret_stripped(py: str) -> None:
    ref = command(py, "-c", "print('  helper-secret-1  ')")
    assert run_secret_command(ref) == ResolvedSecret("helper-secret-1", "command")


def test_resolver_runs_the_command(py: str) -> None:
    ref = command(py, "-c", "import sys; sys.stdout.write('helper-secret-2\\n')")
    resolved = SecretResolver({}, "general", None).resolve((PATH, "OPENAI_API_KEY", ref))
    assert resolved == ResolvedSecret("helper-secret-2", "command")


def test_arguments_are_never_shell_interpreted(py: str, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    ref = command(py, "-c", "import sys; print(sys.argv[1])", f"$(touch {canary}); echo x")
    resolved = run_secret_command(ref)
    assert resolved.value == f"$(touch {canary}); echo x"
    assert not canary.exists()


def test_a_shell_string_is_refused() -> None:
    resolved = run_secret_command({"source": "command", "command": "pass show fermix/openai"})
    assert resolved.value is None
    assert "argv list" in (resolved.problem or "")


@pytest.mark.parametrize("argv", [[], [1, 2], None])
def test_malformed_argv_is_missing(argv: object) -> None:
    resolved = run_secret_command({"source": "command", "command": argv})
    assert resolved.value is None
    assert resolved.problem


def test_nonzero_exit_names_program_and_code_but_not_output(py: str) -> None:
    leak = "printed-then-failed-secret-1"
    script = f"import sys; print({leak!r}); print({leak!r}, file=sys.stderr); sys.exit(3)"
    resolved = run_secret_command(command(py, "-c", script), "x")
    assert resolved.value is None
    assert resolved.source == "missing"
    assert py in (resolved.problem or "")
    assert "code 3" in (resolved.problem or "")
    assert leak not in (resolved.problem or "")
    assert leak not in repr(resolved)


def test_missing_executable_names_it(tmp_path: Path) -> None:
    ghost = str(tmp_path / "no-such-helper")
    resolved = run_secret_command(command(ghost, "show"))
    assert resolved.value is None
    assert ghost in (resolved.problem or "")
    assert "not found" in (resolved.problem or "")


def test_non_executable_file_is_reported(tmp_path: Path) -> None:
    script = tmp_path / "helper.sh"
    script.write_text("#!/bin/sh\necho secret\n")
    script.chmod(0o600)
    resolved = run_secret_command(command(str(script)))
    assert resolved.value is None
    assert "could not start: PermissionError" in (resolved.problem or "")


def test_hung_helper_is_killed_at_its_timeout(py: str) -> None:
    ref = command(py, "-c", "import threading; threading.Event().wait()", timeout=0.3)
    resolved = run_secret_command(ref)
    assert resolved.value is None
    assert "timed out after 0.3s" in (resolved.problem or "")


@pytest.mark.parametrize("timeout", [0, -1, "10", True])
def test_invalid_timeout_is_a_problem_not_a_crash(py: str, timeout: object) -> None:
    resolved = run_secret_command(command(py, "-c", "print('x' * 10)", timeout=timeout))
    assert resolved.value is None
    assert "timeout must be a positive number" in (resolved.problem or "")


def test_empty_output_is_missing(py: str) -> None:
    resolved = run_secret_command(command(py, "-c", "print('   ')"))
    assert resolved.value is None
    assert "printed nothing" in (resolved.problem or "")


def test_non_utf8_output_is_missing(py: str) -> None:
    resolved = run_secret_command(
        command(py, "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe')")
    )
    assert resolved.value is None
    assert "not UTF-8" in (resolved.problem or "")


def test_oversized_output_is_refused(py: str) -> None:
    resolved = run_secret_command(command(py, "-c", "print('A' * 200000)"))
    assert resolved.value is None
    assert "more than" in (resolved.problem or "")


def test_helper_gets_no_stdin(py: str) -> None:
    # A helper that tries to prompt must see end-of-file, not hang on the daemon's terminal.
    script = "import sys; data = sys.stdin.read(); print('eof' if data == '' else 'got input')"
    assert run_secret_command(command(py, "-c", script)).value == "eof"
