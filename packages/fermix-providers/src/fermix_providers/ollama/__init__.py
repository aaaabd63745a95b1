"""Ollama: keyless local models through the OpenAI-compatible endpoint."""
