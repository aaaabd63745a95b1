"""skill_view / skill_list / skill_create / skill_reload / skill_run over real directories."""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.testing.providers import reply, tool_call
from fermix_core.tool import Trust

from .conftest import Rig

pytestmark = pytest.mark.anyio


async def call(rig: Rig, name: str, args: dict, trust: Trust = Trust.OPERATOR, **state):
    ctx = rig.context(trust, **state)
    ctx.capabilities = rig.capabilities.snapshot(Trust.OPERATOR).specs
    return await rig.capabilities.tool(name).invoke(args, ctx)


def write(root: Path, name: str, front: str, body: str = "Do the thing.") -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\n{front}---\n{body}\n")


async def test_create_view_list_and_reload(rig: Rig) -> None:
    out = await call(
        rig,
        "skill_create",
        {
            "name": "trip-notes",
            "description": "Use when planning a trip.",
            "body": "# Trips\nAsk for dates first.",
            "allowed_tools": ["note"],
            "references": {"packing.md": "socks", "more/visa.md": "check visas"},
        },
    )
    assert not out.is_error, out.text
    package = rig.home.path / "skills" / "trip-notes"
    assert (package / "SKILL.md").stat().st_mode & 0o777 == 0o600
    assert out.data["added"] == ["trip-notes"]
    view = await call(rig, "skill_view", {"name": "trip-notes"})
    assert view.text.startswith("# Trips") and "more/visa.md" in view.text
    assert (
        await call(rig, "skill_view", {"name": "trip-notes", "file": "packing"})
    ).text == "socks"
    listed = await call(rig, "skill_list", {})
    assert [s["name"] for s in listed.data["skills"]] == ["trip-notes"]
    assert listed.data["skills"][0]["allowed_tools"] == ["note"]
    # Edited on disk, then reloaded in place: no restart.
    (package / "SKILL.md").write_text(
        (package / "SKILL.md").read_text().replace("Ask for dates", "Ask for budget")
    )
    reloaded = await call(rig, "skill_reload", {})
    assert reloaded.data["changed"] == ["trip-notes"]
    assert "budget" in (await call(rig, "skill_view", {"name": "trip-notes"})).text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"name": "note"}, "already taken"),
        ({"name": "Bad/../x"}, "lowercase letters"),
        ({"name": "ok", "references": {"../escape.md": "x"}}, "inside the package"),
        ({"name": "ok", "references": {"/etc/cron.d/x": "x"}}, "inside the package"),
        ({"name": "ok", "references": {"SKILL.md": "x"}}, "not SKILL.md"),
    ],
)
async def test_create_refuses_collisions_and_escaping_paths(
    rig: Rig, args: dict, fragment: str
) -> None:
    out = await call(rig, "skill_create", {"description": "d", "body": "b", **args})
    assert out.is_error and fragment in out.text
    assert not (rig.home.path.parent / "escape.md").exists()


async def test_create_refuses_an_existing_skill_name(rig: Rig) -> None:
    args = {"name": "dup", "description": "d", "body": "b"}
    assert not (await call(rig, "skill_create", args)).is_error
    again = await call(rig, "skill_create", args)
    assert again.is_error and "already taken" in again.text


async def test_skill_tools_are_owner_only(rig: Rig) -> None:
    for name, args in [("skill_view", {"name": "x"}), ("skill_list", {}), ("skill_reload", {})]:
        assert "skill" not in "".join(rig.capabilities.snapshot(Trust.GUEST).specs)
        out = await call(rig, name, args, trust=Trust.GUEST)
        assert out.is_error and "Only the owner" in out.text


async def test_skill_run_runs_inside_the_skills_confinement(rig: Rig, tmp_path: Path) -> None:
    write(rig.home.path / "skills", "notes-only", "description: d\nallowed_tools: [note]\n")
    write(rig.home.path / "skills", "no-tools", "description: d\nallowed_tools: []\n")
    write(tmp_path / "plugin-skills", "plugin-helper", "description: d\n", "Plugin steps.")
    rig.skills.reload()
    seen: dict[str, tuple[set[str], str]] = {}

    def worker(task, request):
        seen[task] = ({t.name for t in request.tools}, request.messages[0].text)
        return reply(f"ran {task}")

    rig.worker = worker
    for skill in ("notes-only", "no-tools", "plugin-helper"):
        out = await call(rig, "skill_run", {"name": skill, "task": skill})
        assert out.text == f"ran {skill}" and out.data["status"] == "ok"
    assert seen["notes-only"][0] == {"note"}
    assert seen["no-tools"][0] == set()
    # A plugin skill is a guest run: no owner data, no delegation, whatever the caller.
    assert seen["plugin-helper"][0] == {"note"}  # the guest surface: read-only tools only
    assert "Plugin steps." in seen["plugin-helper"][1]
    events = [e for e in rig.events() if e.get("event") == "skill_run_start"]
    assert len(events) == 3 and all(e["parent_session_id"] == "main-1" for e in events)


async def test_skill_run_nesting_is_capped_at_four(rig: Rig) -> None:
    write(rig.home.path / "skills", "loop", "description: d\n")
    rig.skills.reload()
    depths: list[bool] = []

    def worker(task, request):
        names = {t.name for t in request.tools}
        if request.messages[-1].role == "tool":
            return reply("up")
        depths.append("skill_run" in names)
        if "skill_run" in names:
            return tool_call("skill_run", {"name": "loop", "task": "again"})
        return reply("bottom")

    rig.worker = worker
    out = await call(rig, "skill_run", {"name": "loop", "task": "again"})
    assert out.data["status"] == "ok"
    assert depths == [True, True, True, False]
    refused = await call(rig, "skill_run", {"name": "loop", "task": "x"}, delegation_depth=4)
    assert refused.is_error and "cap is 4" in refused.text


async def test_unknown_skill_lists_what_exists(rig: Rig) -> None:
    rig.parent = []
    out = await call(rig, "skill_view", {"name": "nope"})
    assert out.is_error and "available skills" in out.text
