"""Meta capabilities: tools about the agent's own tool surface."""
