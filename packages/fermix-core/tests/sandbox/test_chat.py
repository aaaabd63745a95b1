"""/sandbox, /grant, /revoke and /confirm through the real router and registration."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest
import tomlkit
from fermix_core.channel import InboundMessage, OutboundMessage, SentMessage
from fermix_core.commands.plugin import fermix_commands
from fermix_core.commands.router import CommandRouter
from fermix_core.config import load_config
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.gateway.types import ChannelFeatures
from fermix_core.plugins import PluginHost
from fermix_core.sandbox import ConfirmationStore, SandboxPolicy

pytestmark = pytest.mark.anyio


class Port:
    features = ChannelFeatures()

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def send(self, message: OutboundMessage) -> SentMessage:
        self.sent.append(message)
        return SentMessage(message_id=str(len(self.sent)))


@dataclass
class Services:
    """The parts of the turn runner the sandbox handler reads."""

    home: Any
    config: Any
    services: dict[str, Any] = field(default_factory=dict)
    confirmations: ConfirmationStore | None = None


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Chat:
    layout: Any
    services: Services
    clock: Clock
    router: CommandRouter = field(default_factory=lambda: CommandRouter(fermix_commands()))
    port: Port = field(default_factory=Port)
    policy_gate: TrustPolicy = field(
        default_factory=lambda: TrustPolicy(
            owner_id="owner", allowed_ids=("guest", "helper"), command_allowlist=("helper",)
        )
    )

    async def say(self, text: str, sender: str = "owner", chat: str = "chat") -> str:
        message = InboundMessage(
            channel="tg", chat_id=chat, sender_id=sender, text=text, message_id="m"
        )
        trust = self.policy_gate.authorize(sender)
        parsed = self.router.parse(text)
        assert parsed is not None and trust is not None
        result = await self.router.dispatch(
            parsed,
            message=message,
            trust=trust,
            reply=self.port,
            services=self.services,  # type: ignore[arg-type]
            policy=self.policy_gate,
        )
        assert result.error is None, result
        return self.port.sent[-1].text

    @property
    def sandbox(self) -> SandboxPolicy:
        return self.services.services["sandbox"]

    def file(self) -> dict[str, Any]:
        return tomlkit.parse(self.layout.fermix.config_file.read_text()).unwrap()


@pytest.fixture
def chat(layout) -> Chat:
    layout.fermix.config_file.write_text('# mine\n[sandbox]\nmode = "strict"\n')
    registry = PluginHost().collect()
    loaded = load_config(layout.fermix, registry, environ={})
    clock = Clock()
    policy = SandboxPolicy.from_config(loaded, layout.fermix.path, os_home=layout.home, environ={})
    services = Services(
        home=layout.fermix,
        config=loaded,
        services={"sandbox": policy},
        confirmations=ConfirmationStore(clock=clock),
    )
    return Chat(layout, services, clock)


def token_in(text: str) -> str:
    match = re.search(r"/confirm (\w+)", text)
    assert match, text
    return match.group(1)


async def test_show_describes_the_running_policy(chat) -> None:
    for text in ("/sandbox", "/sandbox show", "/SANDBOX Show"):
        reply = await chat.say(text)
        assert reply.startswith("Sandbox: strict mode, command profile assistant.")
        assert f"Workspace: {chat.layout.workspace}" in reply
        assert "Granted folders: none" in reply
        assert "/sandbox grant PATH" in reply


async def test_grant_asks_then_confirm_applies_and_swaps_the_live_policy(chat) -> None:
    reply = await chat.say(f"/sandbox grant {chat.layout.project}")
    assert f"grant the agent access to {chat.layout.project}" in reply
    assert f'+ allowed_roots = ["{chat.layout.project}"]' in reply
    assert "within 60 s" in reply
    assert "allowed_roots" not in chat.layout.fermix.config_file.read_text()
    assert chat.sandbox.allowed_roots == ()

    done = await chat.say(f"/confirm {token_in(reply)}")
    assert done.startswith(f"Done: grant the agent access to {chat.layout.project}.")
    assert "next tool call" in done
    assert chat.file()["sandbox"]["allowed_roots"] == [str(chat.layout.project)]
    assert "# mine" in chat.layout.fermix.config_file.read_text()
    assert chat.sandbox.allowed_roots == (chat.layout.project,)

    again = await chat.say(f"/confirm {token_in(reply)}")
    assert again.startswith("Not applied: no pending change has that token")


async def test_grant_and_revoke_aliases(chat) -> None:
    reply = await chat.say("/grant ~/code/app")
    await chat.say(f"/confirm {token_in(reply)}")
    assert chat.sandbox.allowed_roots == (chat.layout.project,)
    revoked = await chat.say("/revoke ~/code/app")
    assert revoked.startswith(f"Done: take back access to {chat.layout.project}.")
    assert chat.sandbox.allowed_roots == ()
    assert "allowed_roots" not in chat.file()["sandbox"]


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("/", "whole file system"),
        ("~", "whole home directory"),
        ("~/.ssh", "protected"),
        ("~/.fermix", "Fermix's own state"),
        ("/etc", "operating-system"),
        ("code/app", "relative"),
        ("~/nope", "does not exist"),
        ("", "give the folder"),
    ],
)
async def test_forbidden_grants_are_refused_without_a_token(chat, target, why) -> None:
    reply = await chat.say(f"/sandbox grant {target}".strip())
    assert reply.startswith("Not changed:") and why in reply
    assert "/confirm" not in reply
    assert len(chat.services.confirmations) == 0


async def test_a_token_from_another_chat_or_an_expired_one_does_nothing(chat) -> None:
    token = token_in(await chat.say(f"/grant {chat.layout.project}"))
    other = await chat.say(f"/confirm {token}", chat="other-chat")
    assert "belongs to another conversation" in other
    chat.clock.now += 60
    expired = await chat.say(f"/confirm {token}")
    assert "expired" in expired
    assert chat.sandbox.allowed_roots == ()
    assert "allowed_roots" not in chat.file()["sandbox"]


async def test_guests_never_reach_sandbox_commands_even_when_allowlisted(chat) -> None:
    token = token_in(await chat.say(f"/grant {chat.layout.project}"))
    for sender in ("guest", "helper"):
        for text in ("/sandbox show", f"/grant {chat.layout.project}", f"/confirm {token}"):
            reply = await chat.say(text, sender=sender)
            assert "only the owner can run it" in reply
    # the owner's token survived the attempts
    assert (await chat.say(f"/confirm {token}")).startswith("Done")


async def test_env_allow_needs_confirmation_and_deny_applies_at_once(chat) -> None:
    reply = await chat.say("/sandbox env allow NODE_ENV")
    assert '+ allow = ["NODE_ENV"]' in reply
    await chat.say(f"/confirm {token_in(reply)}")
    assert chat.sandbox.env_allow == ("NODE_ENV",)
    denied = await chat.say("/sandbox env deny NODE_ENV")
    assert denied.startswith("Done: withhold host variable NODE_ENV")
    assert chat.sandbox.env_deny == ("NODE_ENV",) and chat.sandbox.env_allow == ()
    assert chat.file()["sandbox"]["env"] == {"deny": ["NODE_ENV"]}


async def test_env_set_needs_confirmation(chat) -> None:
    reply = await chat.say("/sandbox env set PAGER less -R")
    assert '+ PAGER = "less -R"' in reply
    await chat.say(f"/confirm {token_in(reply)}")
    assert chat.sandbox.env_set == {"PAGER": "less -R"}
    assert chat.sandbox.child_env()["PAGER"] == "less -R"


async def test_presets(chat) -> None:
    bare = await chat.say("/sandbox preset bare")
    assert bare.startswith("Done: switch the command profile to bare")
    assert chat.sandbox.command_profile == "bare"
    extended = await chat.say("/sandbox preset EXTENDED")
    assert "/confirm" in extended and chat.sandbox.command_profile == "bare"
    await chat.say(f"/confirm {token_in(extended)}")
    assert chat.sandbox.command_profile == "extended"
    assert chat.file()["sandbox"]["command_profile"] == "extended"
    assert "unknown preset" in await chat.say("/sandbox preset root")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/sandbox env", "Usage: /sandbox env allow NAME"),
        ("/sandbox env allow", "Usage: /sandbox env allow NAME"),
        ("/sandbox env set NAME", "Usage: /sandbox env allow NAME"),
        ("/sandbox env allow 1BAD", "not a variable name"),
        ("/sandbox preset", "Usage: /sandbox preset"),
        ("/sandbox frobnicate", "Unknown /sandbox subcommand 'frobnicate'"),
        ("/confirm", "Usage: /confirm TOKEN"),
        ("/revoke ~/code/app", "is not a granted folder"),
    ],
)
async def test_mistakes_get_usage(chat, text, expected) -> None:
    assert expected in await chat.say(text)


async def test_confirm_notifies_listeners_after_applying(chat) -> None:
    applied = []
    chat.services.confirmations.listeners.append(lambda pending: applied.append(pending.kind))
    token = token_in(await chat.say(f"/grant {chat.layout.project}"))
    await chat.say(f"/confirm {token}")
    assert applied == ["grant"]


async def test_without_runtime_services_the_handler_explains(layout) -> None:
    bare = Chat(layout, Services(home=None, config=None), Clock())
    assert "not running in this process" in await bare.say("/sandbox")
    assert "not running in this process" in await bare.say("/grant ~/code/app")
    assert "nothing to confirm" in await bare.say("/confirm ABC")


async def test_a_policy_built_from_config_is_used_when_none_runs(chat) -> None:
    chat.services.services.clear()
    reply = await chat.say("/sandbox")
    assert reply.startswith("Sandbox: strict mode")
    token = token_in(await chat.say(f"/grant {chat.layout.project}"))
    done = await chat.say(f"/confirm {token}")
    assert "Restart Fermix to apply it" in done
    assert chat.file()["sandbox"]["allowed_roots"] == [str(chat.layout.project)]
