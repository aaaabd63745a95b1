"""xAI: Grok models on the Responses wire, by API key or Grok subscription OAuth."""
