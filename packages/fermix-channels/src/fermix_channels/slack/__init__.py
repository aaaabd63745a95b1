"""Slack: Events API webhooks under ``/webhook/slack``."""
