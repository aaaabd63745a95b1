"""``react`` through a real channel reply port, with the loop's allowed-reaction state."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.channel import ChannelError, OutboundMessage, SentMessage
from fermix_core.gateway.reply import ChannelReplyPort
from fermix_core.gateway.types import ChannelFeatures
from fermix_core.testing import MemoryChannel, StubChannelHost, ToolContract
from fermix_core.tool import Trust, build_tool
from fermix_tools.meta.plugin import REACT, TOOL_HELP
from fermix_tools.meta.react import INBOUND_MESSAGE_ID, React, is_single_emoji

pytestmark = pytest.mark.anyio

TELEGRAM_SET = ("👍", "❤", "🔥", "🎉", "🙏")
SLACK_SET = ("thumbsup", "white_check_mark", "eyes")


@pytest.fixture
def tool() -> React:
    return build_tool(REACT)  # type: ignore[return-value]


async def inbound_context(running: MemoryChannel, make_context, allowed=(), **extra: Any):
    message = await running.inject("thanks, that's all!")
    ctx = make_context(services={"reply": ChannelReplyPort(running)}, **extra)
    ctx.state["allowed_reactions"] = allowed
    ctx.state[INBOUND_MESSAGE_ID] = message.message_id
    return ctx, message


class TestReactContract(ToolContract):
    valid_args: ClassVar[dict[str, Any]] = {"emoji": "👍"}
    valid_output_is_error: ClassVar[bool] = True  # the contract context has no chat or port
    invalid_args: ClassVar[dict[str, Any]] = {"emoji": ""}
    invalid_field: ClassVar[str] = "emoji"

    def make_tool(self) -> React:
        return build_tool(REACT)  # type: ignore[return-value]


async def test_reacts_to_the_current_message_and_ends_the_turn(tool, running, make_context) -> None:
    ctx, message = await inbound_context(running, make_context)
    out = await tool.invoke({"emoji": "👍"}, ctx)
    assert not out.is_error, out.text
    assert running.reactions == [("chat", message.message_id, "👍")]
    assert out.data["end_turn"] is True and out.data["emoji"] == "👍"
    assert running.sent == [], "a reaction is the answer: no text bubble from the tool"


@pytest.mark.parametrize("emoji", ["👍🏽", "❤️", "👨‍👩‍👧", "🏳️‍🌈", "🇯🇵", "1️⃣", " 🎉 "])
async def test_any_single_emoji_when_the_channel_accepts_any(
    tool, running, make_context, emoji
) -> None:
    ctx, _ = await inbound_context(running, make_context)
    out = await tool.invoke({"emoji": emoji}, ctx)
    assert not out.is_error, out.text
    assert running.reactions[-1][2] == emoji.strip()


@pytest.mark.parametrize(
    "emoji", ["ok", "👍👍", "ok 👍", "🇫", "🏽", ":)", "👨‍", "a\u200db", "\u200b"]
)
async def test_anything_but_one_emoji_is_refused(tool, running, make_context, emoji) -> None:
    ctx, _ = await inbound_context(running, make_context)
    out = await tool.invoke({"emoji": emoji}, ctx)
    assert out.is_error and "not a single emoji" in out.text
    assert running.reactions == []


async def test_a_fixed_set_is_enforced_and_listed(tool, running, make_context) -> None:
    ctx, message = await inbound_context(running, make_context, allowed=TELEGRAM_SET)
    refused = await tool.invoke({"emoji": "😂"}, ctx)
    assert refused.is_error and "👍 ❤ 🔥 🎉 🙏" in refused.text
    accepted = await tool.invoke({"emoji": "❤️"}, ctx)  # VS16 spelling of an allowed ❤
    assert not accepted.is_error
    assert running.reactions == [("chat", message.message_id, "❤")]


async def test_slack_shortcodes_match_with_or_without_colons(tool, running, make_context) -> None:
    ctx, message = await inbound_context(running, make_context, allowed=SLACK_SET)
    out = await tool.invoke({"emoji": ":eyes:"}, ctx)
    assert not out.is_error
    assert running.reactions == [("chat", message.message_id, "eyes")]
    assert (await tool.invoke({"emoji": "👀"}, ctx)).is_error


async def test_without_a_message_to_react_to_it_refuses(tool, running, make_context) -> None:
    ctx = make_context(services={"reply": ChannelReplyPort(running)})
    ctx.state["allowed_reactions"] = ()
    out = await tool.invoke({"emoji": "👍"}, ctx)
    assert out.is_error and "no incoming message" in out.text
    out = await tool.invoke({"emoji": "👍"}, make_context(services={}, conversation_key=None))
    assert out.is_error


async def test_a_channel_without_reactions_refuses(tool, make_context) -> None:
    plain = MemoryChannel("plain", supports_reactions=False)
    ctx, _ = await inbound_context(await _started(plain), make_context)
    out = await tool.invoke({"emoji": "👍"}, ctx)
    assert out.is_error and "cannot show reactions" in out.text
    assert plain.reactions == []


async def test_a_platform_refusal_becomes_a_readable_error(tool, running, make_context) -> None:
    ctx, _ = await inbound_context(running, make_context)
    ctx.state[INBOUND_MESSAGE_ID] = "no-such-message"
    out = await tool.invoke({"emoji": "👍"}, ctx)
    assert out.is_error and "refused the reaction" in out.text and "not found" in out.text


class ReactingPort:
    """A reply port with its own ``react`` (the shape ReplyPort is expected to grow)."""

    def __init__(self) -> None:
        self.features = ChannelFeatures(reactions=())
        self.reactions: list[tuple[str, str, str]] = []

    async def send(self, message: OutboundMessage) -> SentMessage:
        raise ChannelError("this port only reacts")

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        self.reactions.append((chat_id, message_id, emoji))


async def test_a_port_with_its_own_react_is_used(tool, make_context) -> None:
    port = ReactingPort()
    ctx = make_context(services={"reply": port})
    ctx.state.update({"allowed_reactions": (), INBOUND_MESSAGE_ID: "42"})
    out = await tool.invoke({"emoji": "🙏"}, ctx)
    assert not out.is_error and port.reactions == [("chat", "42", "🙏")]


def test_react_is_offered_only_where_the_channel_has_reactions() -> None:
    registry = CapabilityRegistry([TOOL_HELP, REACT])
    for trust in (Trust.OPERATOR, Trust.GUEST):
        assert "react" not in registry.snapshot(trust, reactions=None).specs
        assert "react" in registry.snapshot(trust, reactions=()).specs
        assert "react" in registry.snapshot(trust, reactions=TELEGRAM_SET).specs


def test_single_emoji_detection_edges() -> None:
    assert is_single_emoji("🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f")
    assert not is_single_emoji("🏴\U000e0067\U000e0062")  # tag sequence without its end
    assert not is_single_emoji("")
    assert not is_single_emoji("👍" * 40)


async def _started(channel: MemoryChannel) -> MemoryChannel:
    await channel.start(StubChannelHost(channel.name))
    return channel


def test_the_meta_plugin_registers_its_four_tools() -> None:
    from fermix_core.plugins import PluginHost
    from fermix_core.specs import ToolSpec
    from fermix_tools.meta import plugin

    host = PluginHost()
    host.register(plugin, "tools.meta", distribution="fermix-tools", version="0.1.0")
    registry = host.collect()
    assert registry.errors == []
    assert set(registry.typed(ToolSpec)) == {
        "tool_help",
        "send_attachment",
        "react",
        "model_routing_config",
    }
