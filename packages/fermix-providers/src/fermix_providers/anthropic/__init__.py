"""Anthropic: Claude models on the Messages wire, by API key or Claude subscription OAuth."""
