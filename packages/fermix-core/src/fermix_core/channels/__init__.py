"""Core's channel layer: everything about messaging platforms that is not platform-specific."""
