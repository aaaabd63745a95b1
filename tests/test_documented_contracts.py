"""What the docs promise about exit codes and telemetry names, checked against the code.

Docs drift: a renamed event or a changed exit code leaves a page that still reads right.
These tests tie each documented exit code to a run of the installed ``fermix`` script
that produces it, and every documented telemetry name to an event the code emits.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"

# --------------------------------------------------------------------------- telemetry

#: ``emit("x.y", ...)``, ``self._emit("x.y", ...)``, ``_emit(emit, "x.y", ...)``,
#: ``self._telemetry("x.y", ...)`` — every way the code names an event.
_EMIT = re.compile(r'(?:emit|_telemetry)\w*\(\s*(?:[\w.]+,\s*)?"([a-z_]+(?:\.[a-z_]+)+)"')
_DOTTED = re.compile(r"`([a-z_]+(?:\.[a-z_]+)+)`")
#: Dotted words in docs that are files or host names, not events (``memory.db``,
#: ``media.discordapp.net``).
_FILE_SUFFIXES = {"db", "md", "toml", "json", "jsonl", "py", "log", "sock", "pid", "txt"}
_FILE_SUFFIXES |= {"com", "net", "org", "io", "dev"}


def emitted_events() -> set[str]:
    sources = (ROOT / "packages").glob("*/src/**/*.py")
    return {name for path in sources for name in _EMIT.findall(path.read_text("utf-8"))}


def is_module(name: str) -> bool:
    """``memory.fence``: a module path in one of the packages, not an event."""
    parts = name.split(".")
    for package in (ROOT / "packages").glob("*/src/*"):
        target = package.joinpath(*parts)
        if target.with_suffix(".py").is_file() or (target / "__init__.py").is_file():
            return True
    return False


def documented_events(
    namespaces: set[str], pages: list[Path] | None = None
) -> dict[str, list[str]]:
    """Backticked dotted names in the docs under an event namespace the code uses."""
    found: dict[str, list[str]] = {}
    for page in pages if pages is not None else sorted(DOCS.rglob("*.md")):
        for number, line in enumerate(page.read_text("utf-8").splitlines(), 1):
            for name in _DOTTED.findall(line):
                head, *_, tail = name.split(".")
                if head in namespaces and tail not in _FILE_SUFFIXES and not is_module(name):
                    found.setdefault(name, []).append(f"{page.name}:{number}")
    return found


def test_every_documented_telemetry_name_is_emitted_by_the_code() -> None:
    emitted = emitted_events()
    assert {"provider.retry", "provider.failover", "agent.empty_completion"} <= emitted
    documented = documented_events({name.split(".")[0] for name in emitted})
    assert "provider.retry" in documented and "provider.failover" in documented
    unknown = {name: where for name, where in documented.items() if name not in emitted}
    assert unknown == {}, f"documented but never emitted: {unknown}"


def test_the_event_scan_reports_a_stale_name_and_skips_files(tmp_path) -> None:
    emitted = emitted_events()
    page = tmp_path / "page.md"
    page.write_text(
        "Retries are emitted as `provider.continuation_retry`; the store is `memory.db`;\n"
        "`memory.fence` compiles its patterns lazily;\n"
        "failovers emit `provider.failover`.\n"
    )
    documented = documented_events({name.split(".")[0] for name in emitted}, [page])
    assert set(documented) == {"provider.continuation_retry", "provider.failover"}
    assert [n for n in documented if n not in emitted] == ["provider.continuation_retry"]


# --------------------------------------------------------------------------- exit codes


def section(heading: str) -> str:
    """One ``### `fermix …` `` section of cli.md (or the whole ``## Exit codes`` table)."""
    text = (DOCS / "cli.md").read_text("utf-8")
    start = text.index(heading)
    following = re.search(r"^#{2,3} ", text[start + len(heading) :], re.M)
    end = start + len(heading) + following.start() if following else len(text)
    return " ".join(text[start:end].split())


@pytest.fixture
def env(tmp_path):
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ["FERMIX_HOME"] = str(tmp_path / "home")
    environ["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    for name in ("FERMIX_LOAD_PLUGINS", "OLLAMA_BASE_URL"):
        environ.pop(name, None)
    return environ


def fermix(env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FERMIX, *args],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def broken_config(env) -> None:
    home = Path(env["FERMIX_HOME"])
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config.toml").write_text('[fermix_core.agent]\ntimezone = "Mars/Base"\n')


#: (where in cli.md, the sentence there that states the code, args, setup, expected code)
SCENARIOS = [
    (
        "## Exit codes",
        "| `3` | no daemon is running (`status`, `health`, `stop`, `acp`) |",
        ["status"],
        None,
        3,
    ),
    ("### `fermix acp`", "on standard error and exits `3`", ["acp"], None, 3),
    ("## Exit codes", "`2` | usage: an unknown command", ["no-such-command"], None, 2),
    ("### `fermix ask`", "`2` nothing to ask", ["ask", ""], None, 2),
    (
        "### `fermix ask`",
        "`1` the turn failed (`status` `error` or `no_provider`)",
        ["ask", "hi"],
        None,
        1,
    ),
    ("### `fermix logs`", "Exit `1` when there is no log yet", ["logs"], "doctor", 1),
    ("### `fermix doctor`", "Exit `1` when any row fails", ["doctor"], None, 1),
    ("### `fermix jobs`", 'Exit `3` with "no daemon is running', ["jobs", "list"], None, 3),
    ("### `fermix config`", "`1` invalid |", ["config", "validate"], broken_config, 1),
    ("### `fermix chat`", "`1` when config.toml is invalid", ["chat"], broken_config, 1),
]


@pytest.mark.parametrize(
    ("heading", "sentence", "args", "setup", "code"),
    SCENARIOS,
    ids=[f"{' '.join(s[2]) or 'ask'}-{s[4]}" for s in SCENARIOS],
)
def test_each_documented_exit_code_is_what_the_command_returns(
    env, heading, sentence, args, setup, code
) -> None:
    assert " ".join(sentence.split()) in section(heading), (heading, sentence)
    if setup == "doctor":
        fermix(env, "doctor")  # opens (creates) an empty log: still "no log yet"
    elif setup is not None:
        setup(env)
    result = fermix(env, *args)
    assert result.returncode == code, (args, result.stdout, result.stderr)
