"""HTTP plumbing every wire shares: SSE parsing, error classification, the adapter base."""

from fermix_providers.http.base import HttpProvider, Timeouts
from fermix_providers.http.errors import error_from_exception, error_from_response
from fermix_providers.http.sse import SSEEvent, StreamStats, iter_sse

__all__ = [
    "HttpProvider",
    "SSEEvent",
    "StreamStats",
    "Timeouts",
    "error_from_exception",
    "error_from_response",
    "iter_sse",
]
