"""What the agent can do, for ``fermix capabilities`` and the daemon's ``capabilities`` method."""

from __future__ import annotations

from typing import Any

from fermix_core.specs import ToolSpec


def describe_capabilities(registry: Any) -> dict[str, Any]:
    from fermix_core.agent import CapabilityRegistry
    from fermix_core.tool import Trust

    specs = registry.typed(ToolSpec)
    caps = CapabilityRegistry(
        specs.values(), sources={n: registry.source_of(s) or "" for n, s in specs.items()}
    )
    guest = set(caps.snapshot(Trust.GUEST).specs)
    operator = caps.snapshot(Trust.OPERATOR)
    wire = {d.name for d in operator.definitions()}
    tools = []
    for name, spec in sorted(operator.specs.items()):
        tools.append(
            {
                "name": name,
                "description": spec.description,
                "policy": str(spec.policy),
                "owner_only": spec.owner_only,
                "read_only": spec.read_only,
                "guest": name in guest,
                "inline": name in wire,
                "source": registry.source_of(spec) or "core",
            }
        )
    return {"tools": tools}
