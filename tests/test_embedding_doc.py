"""docs/embedding.md and docs/cli.md say what the code does.

The embedding page's complete example is extracted and run in a fresh interpreter, and what
it prints must be exactly the output the page shows. The CLI page must have a heading for
every built-in command and mention every option each command accepts, so a new command or
flag without documentation fails here.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EMBEDDING = ROOT / "docs" / "embedding.md"
CLI = ROOT / "docs" / "cli.md"
EXAMPLE = "embed_offline.py"


class DocFormatError(ValueError):
    """A page's markers or fences are not where the tests expect them."""


def block_after(markdown: str, marker: str) -> str:
    """The fenced block that directly follows the ``<!-- marker -->`` line."""
    lines = markdown.splitlines()
    wanted = f"<!-- {marker} -->"
    hits = [i for i, line in enumerate(lines) if line.strip() == wanted]
    if len(hits) != 1:
        raise DocFormatError(f"expected exactly one {wanted!r} line, found {len(hits)}")
    start = hits[0] + 1
    if start >= len(lines) or not lines[start].startswith("```"):
        raise DocFormatError(f"{wanted!r} must be followed directly by a ``` block")
    body = []
    for line in lines[start + 1 :]:
        if line.strip() == "```":
            return "\n".join(body) + "\n"
        body.append(line)
    raise DocFormatError(f"the block after {wanted!r} is never closed")


def section(markdown: str, heading: str) -> str:
    """The text under *heading* up to the next heading of the same or a higher level."""
    lines = markdown.splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    try:
        start = lines.index(heading)
    except ValueError:
        raise DocFormatError(f"no heading {heading!r}") from None
    body = []
    for line in lines[start + 1 :]:
        hashes = len(line) - len(line.lstrip("#"))
        if 0 < hashes <= level and line[hashes : hashes + 1] == " ":
            break
        body.append(line)
    return "\n".join(body)


def dotted_references(markdown: str) -> set[str]:
    return {m.rstrip(".") for m in re.findall(r"\bfermix_core(?:\.\w+)+", markdown)}


def resolve(dotted: str) -> Any:
    """Import the longest module prefix of *dotted*, then walk the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.fixture(scope="module")
def embedding_doc() -> str:
    return EMBEDDING.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def cli_doc() -> str:
    return CLI.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- embedding.md


def test_the_complete_example_runs_offline_and_prints_what_the_page_shows(
    embedding_doc: str, tmp_path: Path
) -> None:
    script = tmp_path / EXAMPLE
    script.write_text(block_after(embedding_doc, f"example: {EXAMPLE}"))
    expected = block_after(embedding_doc, f"output: {EXAMPLE}")
    untouched_home = tmp_path / "must-not-be-created"
    env = dict(os.environ)
    env.pop("FERMIX_LOAD_PLUGINS", None)
    env.update(
        FERMIX_HOME=str(untouched_home),
        PYTHON_KEYRING_BACKEND="fermix_core.keyring_backend.MemoryKeyring",
        TMPDIR=str(tmp_path),
    )
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    # The example keeps to its own scratch home and cleans it up.
    assert not untouched_home.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [EXAMPLE]


def test_the_example_uses_an_in_process_function_provider(embedding_doc: str) -> None:
    code = block_after(embedding_doc, f"example: {EXAMPLE}")
    for needle in ("ProviderSpec(", "FunctionProvider(", "entry_points=False", "plugins="):
        assert needle in code, needle


def test_every_open_parameter_and_outcome_field_is_documented(embedding_doc: str) -> None:
    from fermix_core.api import Fermix
    from fermix_core.turns import TurnOutcome

    open_params = inspect.signature(Fermix.open).parameters
    for name in (p for p in open_params if p != "cls"):
        assert f"**`{name}" in embedding_doc or f"`{name}=" in embedding_doc, name
    opening = section(embedding_doc, "## Opening")
    assert all(name in opening for name in open_params if name != "cls")
    fields = inspect.signature(TurnOutcome).parameters
    table = section(embedding_doc, "## Asking")
    for name in fields:
        assert f"`{name}`" in table, name


def test_the_documented_errors_are_raised_by_open(embedding_doc: str) -> None:
    from fermix_core.authfile import AuthFileError, AuthFileModeError
    from fermix_core.config import ConfigError

    errors = section(embedding_doc, "## Errors")
    assert "fermix_core.config.ConfigError" in errors
    assert "fermix_core.authfile.AuthFileModeError" in errors
    assert issubclass(AuthFileModeError, AuthFileError)
    assert "problems" in inspect.signature(ConfigError).parameters


@pytest.mark.parametrize("doc", [EMBEDDING, CLI], ids=lambda p: p.name)
def test_every_named_fermix_core_object_or_config_key_exists(doc: Path, tmp_path: Path) -> None:
    """``fermix_core.x.y`` on the pages is either importable or a real config key."""
    from fermix_core.boot import assemble
    from fermix_core.config import ConfigError
    from fermix_core.home import FermixHome

    loaded = assemble(FermixHome(tmp_path / "home"), environ={}).load_config()
    references = dotted_references(doc.read_text(encoding="utf-8"))
    assert references
    missing = []
    for dotted in sorted(references):
        try:
            resolve(dotted)
            continue
        except (ImportError, AttributeError):
            pass
        try:
            loaded.get(dotted)
        except (ConfigError, KeyError):
            missing.append(dotted)
    assert missing == []


# --------------------------------------------------------------------------- cli.md


def builtin_commands() -> dict[str, Any]:
    import typer
    from fermix_core.cli.commands import COMMANDS
    from fermix_core.specs import resolve_ref

    return {entry.name: typer.main.get_command(resolve_ref(entry.target)) for entry in COMMANDS}


def option_names(command: Any) -> set[str]:
    """Every ``--flag`` of *command* and, for a group, of its subcommands."""
    names = set()
    for param in command.params:
        names.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("-"))
    for sub in getattr(command, "commands", {}).values():
        names |= option_names(sub)
    return names - {"-h", "--help"}


def test_every_builtin_command_has_a_heading(cli_doc: str) -> None:
    headings = {line for line in cli_doc.splitlines() if line.startswith("#")}
    missing = [n for n in builtin_commands() if f"### `fermix {n}`" not in headings]
    assert missing == []


def test_every_option_and_subcommand_is_documented_under_its_command(cli_doc: str) -> None:
    gaps = []
    for name, command in builtin_commands().items():
        text = section(cli_doc, f"### `fermix {name}`")
        gaps += [f"{name} {opt}" for opt in sorted(option_names(command)) if opt not in text]
        for sub in getattr(command, "commands", {}):
            if f"fermix {name} {sub}" not in text:
                gaps.append(f"{name} {sub} (subcommand)")
    assert gaps == []


def test_every_setup_flag_is_documented(cli_doc: str, tmp_path: Path) -> None:
    from fermix_core.boot import assemble
    from fermix_core.home import FermixHome
    from fermix_core.setup import setup_options
    from fermix_core.setup_personalization import PERSONALIZATION_STEP

    assembly = assemble(FermixHome(tmp_path / "home"), environ={}, entry_points=True)
    flags = set(setup_options(assembly)) | {o.flag for o in PERSONALIZATION_STEP.options}
    assert "--provider" in flags  # the providers package is installed in this workspace
    text = section(cli_doc, "### `fermix setup`")
    assert sorted(f for f in flags if f"`{f}" not in text) == []


def test_the_ask_json_keys_are_the_outcome_keys(cli_doc: str) -> None:
    from fermix_core.channel import ConversationKey
    from fermix_core.turns import TurnOutcome

    keys = TurnOutcome("x", ConversationKey("cli", "default", None), "main-1").as_dict()
    text = section(cli_doc, "### `fermix ask`")
    for key in keys:  # a row of the key table names it in its first cell
        assert re.search(rf"^\| [^|]*`{key}`", text, flags=re.M), key
    sample = json.loads(re.search(r"```json\n(.*?)```", text, flags=re.S).group(1))
    assert list(sample) == list(keys)


def test_exit_codes_match_the_code(cli_doc: str) -> None:
    from fermix_core.cli import daemon_cmd

    table = section(cli_doc, "## Exit codes")
    for code in ("0", "1", "2", str(daemon_cmd.NOT_RUNNING)):
        assert f"| `{code}` |" in table, code
    assert daemon_cmd.NOT_RUNNING == 3
    for name in ("status", "health", "stop"):
        assert "`3`" in section(cli_doc, f"### `fermix {name}`"), name


def test_plugin_commands_are_documented_with_their_options(cli_doc: str) -> None:
    import typer
    from fermix_providers.cli_auth import app as auth_app

    command = typer.main.get_command(auth_app)
    text = section(cli_doc, "### `fermix auth`")
    missing = sorted(o for o in option_names(command) if o not in text)
    missing += [s for s in command.commands if f"fermix auth {s}" not in text]
    assert missing == []


@pytest.mark.anyio
async def test_the_selected_plugins_recipe_loads_exactly_what_it_names(
    embedding_doc: str, tmp_path: Path, monkeypatch
) -> None:
    """The recipe, as printed, against a loopback Ollama (OLLAMA_BASE_URL points there)."""
    from fermix_core.testing.loopback import (
        LoopbackServer,
        Reply,
        chat_completion,
        chat_completion_stream,
    )

    async def ollama(request) -> Reply:
        answer = "Lisbon, in May."
        if request.json().get("stream"):
            return chat_completion_stream(answer)
        return chat_completion(answer)

    code = block_after(embedding_doc, "recipe: selected-plugins")
    namespace: dict = {}
    exec(compile(code, "embedding.md recipe", "exec"), namespace)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "fermix_core.keyring_backend.MemoryKeyring")
    async with LoopbackServer(ollama) as server:
        monkeypatch.setenv("OLLAMA_BASE_URL", f"{server.url}/v1")
        text = await namespace["main"](str(tmp_path / "home"))
    assert text == "Lisbon, in May."
    offered = set()
    for request in server.requests:
        offered |= {t["function"]["name"] for t in request.json().get("tools", [])}
    # First-party modules registered in process stay first-party: their tools go on the
    # wire directly rather than behind tool_search.
    assert {"memory_recall", "memory_store"} <= offered and "tool_search" not in offered
    assert not offered & {"shell", "file_read", "web_fetch", "schedule_job"}


@pytest.mark.anyio
async def test_the_ingest_recipe_feeds_the_gateway_and_collects_the_answer(
    embedding_doc: str, fermix_home
) -> None:
    from fermix_core.api import Fermix
    from fermix_core.hookspecs import hookimpl
    from fermix_core.messages import Turn
    from fermix_core.specs import ModelInfo, ProviderSpec
    from fermix_core.testing import FunctionProvider

    seen: list = []

    async def model(request):
        seen.append(request)
        users = [m.text for m in request.messages if m.role == "user"]
        return Turn(content=f"reply {len(users)}: {users[-1]}", model="m1")

    class Harness:
        @hookimpl
        def fermix_providers(self):
            yield ProviderSpec(
                name="harness",
                label="Harness",
                factory=lambda spec, settings: FunctionProvider(model, name="harness"),
                keyless=True,
                needs_server=False,
                default_model="m1",
                models=(ModelInfo(id="m1", context_window=100_000),),
            )

    namespace: dict = {}
    exec(compile(block_after(embedding_doc, "recipe: ingest"), "embedding.md", "exec"), namespace)
    widget = namespace["chat_widget"]
    config = {
        "fermix_core": {
            "providers": {"harness": {"primary": True}},
            "memory": {"review_enabled": False},
        }
    }
    async with Fermix.open(
        fermix_home, config=config, plugins=[("providers.harness", Harness())]
    ) as fx:
        assert await widget(fx, "ana", "hello") == ["reply 1: hello"]
        assert await widget(fx, "ana", "again") == ["reply 2: again"]  # ana's own history
        assert await widget(fx, "bo", "hi") == ["reply 1: hi"]  # bo's conversation is apart
        help_text = await widget(fx, "bo", "/help")  # slash commands run before the agent
    assert len(seen) == 3  # /help cost no model call
    assert help_text and "/new" in help_text[0]
