"""The runtime's shared HTTP client, with certificate loading deferred to the first TLS use.

Every provider adapter of a runtime shares one ``httpx.AsyncClient``. httpx builds its
verifying ``ssl.SSLContext`` when the client is constructed, and loading the CA bundle into
it costs about 40 ms of CPU and a megabyte or two of memory — paid by every process that
builds a client, including a one-off ``fermix ask`` to a model on ``http://127.0.0.1``
that never makes a TLS connection. :class:`DeferredTrustContext` is a verifying client
context that loads its trust store on the first handshake instead; the verification
itself is the one httpx would do (``SSL_CERT_FILE``, then ``SSL_CERT_DIR``, then
certifi's bundle).
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from typing import Any

#: Idle keep-alive connections older than this are discarded at checkout.
KEEPALIVE_EXPIRY_SECONDS = 15.0


class DeferredTrustContext(ssl.SSLContext):
    """``ssl.create_default_context()`` for a client, with the CA certificates loaded on
    the first ``wrap_bio``/``wrap_socket`` (every TLS connection goes through one)."""

    def __new__(cls, *, trust_env: bool = True) -> DeferredTrustContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, *, trust_env: bool = True) -> None:
        # PROTOCOL_TLS_CLIENT already means CERT_REQUIRED and check_hostname, as in
        # create_default_context; what else that function sets is copied here.
        super().__init__()
        self._trust_env = trust_env
        self._trust_loaded = False
        self._trust_lock = threading.Lock()
        if sys.version_info >= (3, 13):  # create_default_context's stricter defaults there
            self.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment and hasattr(self, "keylog_filename"):
            self.keylog_filename = keylog

    @property
    def trust_loaded(self) -> bool:
        return self._trust_loaded

    def load_trust(self) -> None:
        """Load the CA certificates now (idempotent, thread-safe)."""
        if self._trust_loaded:
            return
        with self._trust_lock:
            if self._trust_loaded:
                return
            cafile = os.environ.get("SSL_CERT_FILE") if self._trust_env else None
            capath = os.environ.get("SSL_CERT_DIR") if self._trust_env else None
            if cafile:
                self.load_verify_locations(cafile=cafile)
            elif capath:
                self.load_verify_locations(capath=capath)
            else:
                import certifi

                self.load_verify_locations(cafile=certifi.where())
            self._trust_loaded = True

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self.load_trust()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self.load_trust()
        return super().wrap_bio(*args, **kwargs)


def runtime_client(**kwargs: Any) -> Any:
    """The runtime-wide ``httpx.AsyncClient``: keep-alive expiry, no redirects, and a
    verifying TLS context that loads its certificates only when a TLS connection opens.
    Keyword arguments are passed on to ``httpx.AsyncClient``."""
    import httpx

    kwargs.setdefault("limits", httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS))
    kwargs.setdefault("follow_redirects", False)
    kwargs.setdefault("verify", DeferredTrustContext(trust_env=kwargs.get("trust_env", True)))
    return httpx.AsyncClient(**kwargs)
