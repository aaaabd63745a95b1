"""Registers the meta tools. Registration imports nothing but spec records."""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import PolicyClass, ToolSpec

TOOL_HELP = ToolSpec(
    name="tool_help",
    description=(
        "Explain one tool you can call on this turn: its argument schema, when to use it, "
        "and how it fails. Use it before calling an unfamiliar tool."
    ),
    factory="fermix_tools.meta.tool_help:ToolHelp",
    args_model="fermix_tools.meta.tool_help:ToolHelpArgs",
    policy=PolicyClass.READ_ONLY,
    read_only=True,
    owner_only=False,
    guidance=(
        "Pass the exact tool name as listed in the capability catalog. The answer covers only "
        "tools available to this conversation right now."
    ),
    failure_modes=(
        "unknown or unavailable tool name: the error lists the tools you can ask about",
    ),
)

SEND_ATTACHMENT = ToolSpec(
    name="send_attachment",
    description=(
        "Send one local file from the sandbox (workspace or a granted folder) to the current "
        "chat, with an optional caption. Outbound only; URLs are rejected."
    ),
    factory="fermix_tools.meta.send_attachment:SendAttachment",
    args_model="fermix_tools.meta.send_attachment:SendAttachmentArgs",
    policy=PolicyClass.CHANNEL_SIDE_EFFECT,
    read_only=False,
    owner_only=True,
    guidance=(
        "Use it to deliver a file you created or found (a report, an image, an export). The "
        "kind is chosen from the file type; pass kind='document' to send an image or video as "
        "a plain file. Images the user sent you are already in the conversation — do not send "
        "them back. Sending the same file with the same caption again within 60 seconds is "
        "skipped, so a retry never posts twice."
    ),
    failure_modes=(
        "outside the sandbox: the path is not under the workspace or a granted root "
        "(the error says how to get access)",
        "URL given: download or save the file into the workspace first",
        "no such file / a directory / empty / over the size cap",
        "no chat: sub-agents and jobs without a channel cannot send files",
        "already sent: the same file and caption went out less than 60 seconds ago",
    ),
)

REACT = ToolSpec(
    name="react",
    description=(
        "Acknowledge the user's current message with a single emoji reaction instead of a "
        "text reply. Ends the turn with no text bubble."
    ),
    factory="fermix_tools.meta.react:React",
    args_model="fermix_tools.meta.react:ReactArgs",
    policy=PolicyClass.CHANNEL_SIDE_EFFECT,
    read_only=False,
    owner_only=False,
    guidance=(
        'Use it only when the message needs nothing but an acknowledgement ("ok", '
        '"thanks", a thumbs-up). Anything that needs an answer gets a text reply instead. '
        "When the catalog lists allowed reactions, pick one of those exactly."
    ),
    failure_modes=(
        "not a single emoji, or not in this channel's allowed set: the error lists the set",
        "the platform refused the reaction: answer with a short text instead",
    ),
)

MODEL_ROUTING_CONFIG = ToolSpec(
    name="model_routing_config",
    description=(
        "Show or set the model sub-agents run on ([fermix_core.routing] subagent_model, "
        "subagent_provider, subagent_reasoning_effort). Never changes your own model."
    ),
    factory="fermix_tools.meta.routing_config:ModelRoutingConfig",
    args_model="fermix_tools.meta.routing_config:ModelRoutingConfigArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    owner_only=True,
    guidance=(
        "Call action='show' first. A model without a provider runs on the primary provider; "
        "a model from another provider needs subagent_provider too. Pass an empty string to "
        "clear a field (sub-agents then inherit the main model)."
    ),
    failure_modes=(
        "mis-pairing: the model belongs to another provider in the catalog (the error names it)",
        "provider not configured: set it up with `fermix setup` first",
        "invalid config: nothing is written when the merged routing would not load",
    ),
)


@hookimpl
def fermix_tools() -> Iterable[ToolSpec]:
    return (TOOL_HELP, SEND_ATTACHMENT, REACT, MODEL_ROUTING_CONFIG)
