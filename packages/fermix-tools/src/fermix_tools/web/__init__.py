"""Web capabilities: ``web_fetch`` (one URL, SSRF-guarded) and ``web_search``."""
