"""CommandRouter: parsing, aliases, role gates, help filtering, failures, registration."""

from __future__ import annotations

import pytest
from fermix_core.commands import plugin as core_commands
from fermix_core.commands.router import CommandConflictError, CommandRouter
from fermix_core.hookspecs import hookimpl
from fermix_core.specs import CommandSpec, Role
from fermix_core.tool import Trust

pytestmark = pytest.mark.anyio


def spec(name: str, *aliases: str, role: Role = Role.OPERATOR, **kw) -> CommandSpec:
    async def handler(ctx):
        return f"{ctx.name} ran as /{ctx.invoked_as} with {ctx.args!r}"

    return CommandSpec(
        name=name, help=f"{name} help", handler=handler, role=role, aliases=aliases, **kw
    )


@pytest.fixture
def router() -> CommandRouter:
    return CommandRouter([spec("new", "clear"), spec("help", role=Role.ANY)])


@pytest.mark.parametrize(
    ("text", "name", "invoked", "args"),
    [
        ("/new", "new", "new", ""),
        ("/NEW", "new", "new", ""),
        ("/Clear", "new", "clear", ""),
        ("  /new   ", "new", "new", ""),
        ("/new@fermix_bot", "new", "new", ""),
        ("/help@Some.Bot topic", "help", "help", "topic"),
        ("/new please\nand more\n", "new", "new", "please\nand more"),
        ("/help\targs", "help", "help", "args"),
    ],
)
def test_parse_recognizes_commands(router, text, name, invoked, args) -> None:
    parsed = router.parse(text)
    assert parsed is not None
    assert (parsed.name, parsed.invoked_as, parsed.args) == (name, invoked, args)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "new",
        "hello /new",
        "/newer",
        "/new/path",
        "/usr/bin/env python",
        "/ new",
        "//new",
        "/new@",
        "/1new",
        "/unknown command",
    ],
)
def test_parse_leaves_everything_else_to_the_agent(router, text) -> None:
    assert router.parse(text) is None


def test_conflicting_names_and_aliases_are_refused() -> None:
    with pytest.raises(CommandConflictError, match="/clear"):
        CommandRouter([spec("new", "clear"), spec("clear")])
    with pytest.raises(CommandConflictError, match="/new"):
        CommandRouter([spec("new"), spec("reset", "new")])


def test_invalid_specs_and_non_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="help is required"):
        CommandRouter([CommandSpec(name="x", handler="a.b:c")])
    with pytest.raises(TypeError):
        CommandRouter(["help"])  # type: ignore[list-item]


def test_role_gate() -> None:
    from fermix_core.gateway.trust import TrustPolicy

    policy = TrustPolicy(owner_id="o", allowed_ids=["g", "h"], command_allowlist=["h"])
    op_only, anyone = spec("new"), spec("help", role=Role.ANY)
    sandbox = spec("sandbox", "grant", sandbox_mutation=True)
    allowed = CommandRouter.allowed
    assert allowed(op_only, trust=Trust.OPERATOR, sender_id="o", policy=policy)
    assert allowed(sandbox, trust=Trust.OPERATOR, sender_id="o", policy=policy)
    assert allowed(anyone, trust=Trust.GUEST, sender_id="g", policy=policy)
    assert not allowed(op_only, trust=Trust.GUEST, sender_id="g", policy=policy)
    assert allowed(op_only, trust=Trust.GUEST, sender_id="h", policy=policy)
    assert not allowed(sandbox, trust=Trust.GUEST, sender_id="h", policy=policy)
    assert not allowed(op_only, trust=Trust.GUEST, sender_id="h", policy=None)
    # A (nonsensical) "any role" sandbox mutation still stays with the operator.
    odd = spec("odd", role=Role.ANY, sandbox_mutation=True)
    assert not allowed(odd, trust=Trust.GUEST, sender_id="h", policy=policy)


def test_help_entries_show_only_what_the_sender_may_run(runner) -> None:
    as_guest = runner.router.help_entries(
        trust=Trust.GUEST, sender_id="guest", policy=runner.policy
    )
    assert [name for name, _, _ in as_guest] == ["help", "whoami"]
    as_helper = runner.router.help_entries(
        trust=Trust.GUEST, sender_id="helper", policy=runner.policy
    )
    assert "new" in [n for n, _, _ in as_helper] and "sandbox" not in [n for n, _, _ in as_helper]
    as_owner = runner.router.help_entries(
        trust=Trust.OPERATOR, sender_id="owner", policy=runner.policy
    )
    names = [n for n, _, _ in as_owner]
    assert names == [
        "help",
        "whoami",
        "new",
        "compact",
        "stop",
        "background",
        "tasks",
        "ultra",
        "sandbox",
    ]
    helps = dict((n, h) for n, h, _ in as_owner)
    assert "(also /clear)" in helps["new"]
    assert "(also /grant, /revoke, /confirm)" in helps["sandbox"]


async def test_dispatch_passes_args_and_alias_and_emits(runner) -> None:
    router = CommandRouter([spec("new", "clear")])
    runner.router = router
    result = await runner.run("/CLEAR@bot  now please ")
    assert result.ran and not result.refused
    assert runner.last == "new ran as /clear with 'now please'"
    assert [n for n, _ in runner.events.items] == ["command.received", "command.dispatch"]
    received, dispatch = (d for _, d in runner.events.items)
    assert received == {
        "command": "new",
        "invoked_as": "clear",
        "channel": "tg",
        "trust": "operator",
    }
    assert dispatch["ok"] is True and dispatch["duration_ms"] >= 0


async def test_refusal_reply_and_event(runner) -> None:
    result = await runner.run("/compact", sender="guest")
    assert result.refused and not result.ran
    assert runner.services.calls == []
    assert "/compact is owner-only" in runner.last
    (event,) = runner.events.named("command.unauthorized")
    assert event["reason"] == "operator_only"


async def test_refusal_without_an_owner_says_how_to_configure_one(runner) -> None:
    from fermix_core.gateway.trust import TrustPolicy

    runner.policy = TrustPolicy(allowed_ids=["a", "b"], channel="discord")
    await runner.run("/new", sender="a")
    assert "no owner configured" in runner.last
    assert "owner_user_id in [fermix_channels.discord]" in runner.last


async def test_handler_failures_are_reported_without_details(runner) -> None:
    async def broken(ctx):
        raise ValueError("password=hunter2")

    def wrong_type(ctx):
        return 42

    runner.router = CommandRouter(
        [
            CommandSpec(name="broken", help="h", handler=broken),
            CommandSpec(name="wrong", help="h", handler=wrong_type),
            CommandSpec(name="missing", help="h", handler="fermix_nonexistent.mod:handler"),
        ]
    )
    result = await runner.run("/broken")
    assert result.error == "ValueError" and not result.ran
    assert "hunter2" not in runner.last and "fermix logs" in runner.last
    result = await runner.run("/wrong")
    assert result.error == "TypeError"
    result = await runner.run("/missing")
    assert result.error == "RefError"
    assert "failed to load" in runner.last and "fermix plugins list" in runner.last
    oks = [d["ok"] for d in runner.events.named("command.dispatch")]
    assert oks == [False, False, False]


async def test_sync_handlers_and_silent_handlers_work(runner) -> None:
    def sync(ctx):
        return "sync answer"

    async def silent(ctx):
        await ctx.say("said it myself")
        return None

    runner.router = CommandRouter(
        [
            CommandSpec(name="sync", help="h", handler=sync, role=Role.ANY),
            CommandSpec(name="silent", help="h", handler=silent, role=Role.ANY),
        ]
    )
    await runner.run("/sync", sender="guest")
    await runner.run("/silent", sender="guest")
    assert runner.port.texts == ["sync answer", "said it myself"]


def test_core_commands_register_through_the_plugin_hook(plugin_host) -> None:
    class ThirdParty:
        @hookimpl
        def fermix_commands(self):
            yield CommandSpec(name="ping", help="pong", handler="x.y:z", role=Role.ANY)

    plugin_host.register(core_commands, "core.commands")
    plugin_host.register(ThirdParty(), "ping")
    registry = plugin_host.collect(["command"])
    assert registry.errors == []
    router = CommandRouter.from_registry(registry)
    assert {s.name for s in router.specs} == {
        "help",
        "whoami",
        "new",
        "compact",
        "stop",
        "background",
        "tasks",
        "ultra",
        "sandbox",
        "ping",
    }
    assert router.parse("/bg do it").name == "background"
    assert router.parse("/confirm X").spec.sandbox_mutation
    assert router.get("PING").role is Role.ANY


def test_a_plugin_command_colliding_with_core_is_dropped_by_the_registry(plugin_host) -> None:
    class Squatter:
        @hookimpl
        def fermix_commands(self):
            yield CommandSpec(name="reset", help="h", handler="x.y:z", aliases=("stop",))

    plugin_host.register(core_commands, "core.commands")
    plugin_host.register(Squatter(), "squatter")
    registry = plugin_host.collect(["command"])
    assert any(e.name == "stop" and "reserved by first-party" in e.message for e in registry.errors)
    # Core's module, even registered in process, is first-party: its /stop stays and the
    # squatter is refused whole.
    router = CommandRouter.from_registry(registry)
    assert router.parse("/stop").spec.handler.endswith(":stop_command")
    assert router.parse("/reset") is None


def test_registration_module_stays_cheap() -> None:
    import subprocess
    import sys

    code = (
        "import sys, fermix_core.commands.plugin as p; "
        "list(p.fermix_commands()); "
        "heavy = [m for m in ('pydantic', 'anyio', 'fermix_core.commands.router') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
