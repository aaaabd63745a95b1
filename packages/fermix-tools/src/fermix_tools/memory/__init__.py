"""Memory capabilities: save, correct, forget and recall long-term memory."""
