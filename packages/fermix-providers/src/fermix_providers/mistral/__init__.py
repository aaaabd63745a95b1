"""Mistral: the three rolling ``-latest`` tiers on the Chat Completions wire."""
