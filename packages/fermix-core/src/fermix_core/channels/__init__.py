"""Core's channel layer: everything about messaging platforms that is not platform-specific.

``runtime`` builds and supervises the enabled adapters and keeps their health,
``idempotency`` remembers which platform messages already ran, ``ingress`` is the HTTP app
that serves health and the adapters' webhook routes, ``outbound`` is the reply port that
renders, splits, paces and retries a reply, ``presentation`` renders Markdown per dialect
and ``streaming`` drives live replies. The adapter contract itself stays in
:mod:`fermix_core.channel`, where plugins import it.
"""
