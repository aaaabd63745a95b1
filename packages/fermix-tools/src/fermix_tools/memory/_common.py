"""What every memory tool shares: reaching the backend and turning its errors into answers."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from fermix_core.memory.backend import MemoryBackend, MemoryStoreError, MemoryUnavailableError
from fermix_core.memory.fence import InjectionFlag
from fermix_core.tool import ToolContext, ToolError

log = logging.getLogger("fermix.tools.memory")

Category = Literal["identity", "preference", "interest", "goal", "context", "directive"]

CATEGORY_HELP = (
    "identity, preference, interest, goal (about the owner); context (ongoing work, "
    "decisions) or directive (a standing instruction: the owner's own words, quoted from "
    "their message)"
)


def memory_backend(ctx: ToolContext) -> MemoryBackend:
    backend = ctx.service("memory")
    if not isinstance(backend, MemoryBackend):
        raise ToolError("long-term memory is not available in this context")
    return backend


@contextmanager
def memory_errors() -> Iterator[None]:
    """Backend refusals become readable tool errors; a broken database says to retry."""
    try:
        yield
    except MemoryStoreError as exc:
        raise ToolError(str(exc)) from None
    except MemoryUnavailableError as exc:
        raise ToolError(f"memory is unavailable right now; retry later ({exc})") from None


def trace_flags(ctx: ToolContext, tool: str, flags: Iterable[InjectionFlag]) -> list[dict]:
    """Record injection flags in the trace (best effort) and return them for ``data``."""
    listed = [flag.as_dict() for flag in flags]
    if not listed:
        return listed
    tracer: Any = ctx.services.get("tracer")
    if tracer is not None:
        try:
            tracer.record(
                "agent_event",
                session_id=ctx.session_id or None,
                event="memory.injection_flagged",
                tool=tool,
                items=listed,
            )
        except Exception:
            log.exception("could not trace memory injection flags")
    return listed
