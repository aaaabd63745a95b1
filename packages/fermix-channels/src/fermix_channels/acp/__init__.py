"""ACP: the local Agent Client Protocol surface bridged over ``~/.fermix/acp.sock``."""
