"""Slack: Events API webhooks under ``/webhook/slack``, or Socket Mode; Web API replies.

One module per concern: ``config`` (the section), ``verify`` (request signatures), ``parse``
(event payloads into :class:`~fermix_core.channel.InboundMessage`), ``client`` (the Web API
over the shared httpx client, errors mapped onto the typed errors), ``socket`` (the Socket Mode
connection), ``adapter`` (the :class:`~fermix_core.channel.Channel`).
"""
