"""OpenAI Platform: API-key access, Responses wire by default, routable to Chat Completions."""
