"""Core's channel layer: what every adapter stands on, whoever wrote it.

``runtime`` builds and supervises the enabled adapters and keeps their health,
``idempotency`` remembers which platform messages already ran, ``ingress`` is the HTTP app
that serves health and the adapters' webhook routes, and ``outbound`` is the reply port that
renders, splits, paces and retries a reply. The adapter contract itself stays in
:mod:`fermix_core.channel`, where plugins import it.
"""
