"""OpenAI Codex: GPT models through a ChatGPT subscription (OAuth), on the Responses wire."""
