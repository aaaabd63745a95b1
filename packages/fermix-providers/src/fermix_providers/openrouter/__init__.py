"""OpenRouter: vendor-prefixed models from many vendors on the Chat Completions wire."""
