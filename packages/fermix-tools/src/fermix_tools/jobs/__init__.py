"""Scheduled-job capabilities: create, change, inspect and run durable jobs."""
