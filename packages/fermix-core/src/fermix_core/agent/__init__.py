"""The agent loop, the trust-filtered capability snapshot it runs from, and the model seam.

Typical assembly (the turn runner does this once per turn)::

    registry = CapabilityRegistry(spec_registry.typed(ToolSpec).values(), sources=..., deferral=...)
    caps = registry.snapshot(Trust.GUEST, reactions=channel_features.reactions)
    result = await AgentLoop(caller, caps, emit=runtime.emit).run(messages, ctx)
"""

from __future__ import annotations

from fermix_core.agent.caller import (
    ModelCaller,
    ProviderRoute,
    SingleProviderCaller,
    continuation_retryable,
)
from fermix_core.agent.capabilities import (
    BRIDGE_NAMES,
    Capabilities,
    CapabilityRegistry,
    ToolUnavailable,
)
from fermix_core.agent.detector import RepeatedCallDetector
from fermix_core.agent.loop import (
    DEFAULT_MAX_ITERATIONS,
    EMPTY_REPLY,
    AgentLoop,
    LoopResult,
    ToolCallRecord,
)

__all__ = [
    "BRIDGE_NAMES",
    "DEFAULT_MAX_ITERATIONS",
    "EMPTY_REPLY",
    "AgentLoop",
    "Capabilities",
    "CapabilityRegistry",
    "LoopResult",
    "ModelCaller",
    "ProviderRoute",
    "RepeatedCallDetector",
    "SingleProviderCaller",
    "ToolCallRecord",
    "ToolUnavailable",
    "continuation_retryable",
]
