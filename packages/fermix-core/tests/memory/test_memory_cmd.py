"""``fermix memory review|restore|search`` on a real FERMIX_HOME and a real memory.db."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from fermix_core.agent.caller import SingleProviderCaller
from fermix_core.cli import memory_cmd
from fermix_core.home import FermixHome
from fermix_core.memory import Provenance
from fermix_core.memory.sqlite import SqliteMemoryBackend
from fermix_core.messages import Message, Usage
from fermix_core.store import ConversationStore
from fermix_core.testing import ScriptedProvider
from typer.testing import CliRunner

runner = CliRunner()
OWNER = Provenance(speaker="owner")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FermixHome:
    home = FermixHome(tmp_path / "home")
    monkeypatch.setenv("FERMIX_HOME", str(home.path))
    monkeypatch.setenv("FERMIX_LOAD_PLUGINS", "")
    return home


def cli(*args: str):
    return runner.invoke(memory_cmd.app, list(args))


def seed(home: FermixHome) -> dict[str, str]:
    async def main() -> dict[str, str]:
        home.ensure()
        store = await ConversationStore.open(home.memory_db)
        backend = await SqliteMemoryBackend.open(home.memory_db)
        try:
            tea = await backend.store(
                "preference", "Prefers green tea", key="drink", provenance=OWNER
            )
            old = await backend.store("interest", "Collects tea cups", provenance=OWNER)
            await backend.forget(old.fact.id)
            cid = await store.conversation_id(("cli", "default", None))
            handle = await store.begin_turn(
                cid,
                Message.user("which tea was it?"),
                speaker="owner",
                sender_id="l",
                session_id="m",
            )
            await store.commit_turn(
                handle.turn_id,
                [Message.assistant("sencha")],
                usage=Usage(),
                model="m",
                provider="p",
            )
            return {"tea": tea.fact.id, "cups": old.fact.id}
        finally:
            await backend.aclose()
            await store.close()

    return anyio.run(main)


async def owner_says(home: FermixHome, text: str) -> None:
    store = await ConversationStore.open(home.memory_db)
    try:
        cid = await store.conversation_id(("cli", "default", None))
        await store.begin_turn(
            cid, Message.user(text), speaker="owner", sender_id="l", session_id="m"
        )
    finally:
        await store.close()


def test_search_without_memory_creates_nothing(home: FermixHome) -> None:
    result = cli("search", "tea")
    assert result.exit_code == 0, result.output
    assert "No memory yet." in result.stdout
    assert not home.path.exists()
    assert json.loads(cli("search", "tea", "--json").stdout) == {"facts": [], "history": []}


def test_search_prints_facts_and_history(home: FermixHome) -> None:
    ids = seed(home)
    table = cli("search", "tea")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "CATEGORY", "KEY", "FROM", "UPDATED", "FACT"]
    assert lines[1].startswith(f"{ids['tea']} ") and "Prefers green tea" in lines[1]
    assert "Collects" not in table.stdout, "forgotten facts only with --archived"
    archived = cli("search", "tea", "--archived")
    assert f"{ids['cups']} (forgotten)" in archived.stdout
    both = json.loads(cli("search", "tea", "--source", "all", "--json").stdout)
    assert [f["id"] for f in both["facts"]] == [ids["tea"]]
    assert [m["text"] for m in both["history"]] == ["which tea was it?"]
    history = cli("search", "sencha", "--source", "history")
    assert "MESSAGE" in history.stdout and "cli:default" in history.stdout
    assert "Nothing matches" in cli("search", "espresso").stdout


def test_search_rejects_an_unknown_source(home: FermixHome) -> None:
    result = cli("search", "tea", "--source", "web")
    assert result.exit_code == 2
    assert "--source must be" in result.stderr


def test_restore_brings_back_a_forgotten_fact(home: FermixHome) -> None:
    ids = seed(home)
    done = cli("restore", ids["cups"])
    assert done.exit_code == 0, done.output
    assert f"Restored memory {ids['cups']} [interest]: Collects tea cups" in done.stdout
    again = cli("restore", ids["cups"])
    assert again.exit_code == 1 and "not forgotten" in again.stderr
    missing = cli("restore", "999")
    assert missing.exit_code == 1 and "no memory with id '999'" in missing.stderr


def test_restore_refuses_a_key_that_moved_on(home: FermixHome) -> None:
    ids = seed(home)

    async def replace() -> None:
        backend = await SqliteMemoryBackend.open(home.memory_db)
        try:
            await backend.forget(ids["tea"])
            await backend.store("preference", "Prefers coffee", key="drink", provenance=OWNER)
        finally:
            await backend.aclose()

    anyio.run(replace)
    result = cli("restore", ids["tea"])
    assert result.exit_code == 1
    assert "key 'drink' is now held by memory" in result.stderr


def test_restore_without_memory(home: FermixHome) -> None:
    result = cli("restore", "1")
    assert result.exit_code == 1 and "no memory yet" in result.stderr


def test_review_status(home: FermixHome) -> None:
    text = cli("review")
    assert text.exit_code == 0, text.output
    assert "Background review: on, every 24 h after a reply" in text.stdout
    assert "Last run: never" in text.stdout
    data = json.loads(cli("review", "--json").stdout)
    assert data["enabled"] is True and data["last_run"] is None


def test_review_now_without_a_provider_says_to_run_setup(home: FermixHome) -> None:
    seed(home)
    result = cli("review", "--now")
    assert result.exit_code == 1
    assert "fermix setup" in result.stderr
    assert not (home.path / "memory" / "main" / ".review.json").exists(), "no failure recorded"


def test_review_now_runs_one_review(home: FermixHome, monkeypatch: pytest.MonkeyPatch) -> None:
    seed(home)
    provider = ScriptedProvider(
        ['{"operations": [{"op": "add", "category": "preference", "content": "Likes sencha"}]}']
    )

    async def fake_caller(context, stack):
        return SingleProviderCaller(provider), ""

    monkeypatch.setattr(memory_cmd, "_open_caller", fake_caller)
    result = cli("review", "--now")
    assert result.exit_code == 0, result.output
    assert "Review done: 2 new owner message(s) read; changes: 1 added" in result.stdout
    assert "Likes sencha" in (home.path / "memory" / "main" / "USER.md").read_text()
    status = json.loads(cli("review", "--json").stdout)
    assert status["last_success"] is not None and status["next_due"] is not None
    anyio.run(owner_says, home, "and oolong on Sundays")
    failing = ScriptedProvider(["no json here"])
    monkeypatch.setattr(
        memory_cmd, "_open_caller", lambda c, s: _async((SingleProviderCaller(failing), ""))
    )
    failed = cli("review", "--now", "--json")
    assert failed.exit_code == 1
    assert json.loads(failed.stdout)["status"] == "failed"


async def _async(value):
    return value


def test_an_invalid_config_is_reported(home: FermixHome) -> None:
    home.ensure()
    home.config_file.write_text("[fermix_core.memory]\nbackend = 3\n")
    result = cli("search", "tea")
    assert result.exit_code == 1
    assert "config.toml is not valid" in result.stderr


def test_search_in_a_real_process(home: FermixHome) -> None:
    ids = seed(home)
    code = "from fermix_core.cli.memory_cmd import app; app(prog_name='fermix memory')"
    env = {**os.environ, "FERMIX_HOME": str(home.path), "FERMIX_LOAD_PLUGINS": ""}
    done = subprocess.run(
        [sys.executable, "-c", code, "search", "green", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [f["id"] for f in json.loads(done.stdout)["facts"]] == [ids["tea"]]
