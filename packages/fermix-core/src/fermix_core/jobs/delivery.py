"""Where a run's result goes: ``none``, ``local``, ``origin`` or ``channel``.

The destination is resolved **once, at acceptance** (:func:`resolve_delivery`) and stored
on the job as ``delivery_target`` — ``origin`` becomes the concrete chat the job was
created in, so a later config change can never silently retarget it. At send time only
the channel **adapter** is looked up, by name, through the ``ports`` callable the service
provides (a running channel's reply port, or ``None``).

A send that fails (no adapter running for that channel, or the platform refused) is
retried with backoff and then recorded on the run (``delivery_status = failed`` with the
reason); the result itself is always on the run, so nothing is lost. ``local`` keeps the
result on the run only (``fermix jobs show`` / ``get_job_run`` read it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from fermix_core.channel import OutboundMessage
from fermix_core.jobs.clock import Clock
from fermix_core.jobs.records import DELIVERY_MODES, JobRecord, RunRecord
from fermix_core.jobs.store import JobStore

__all__ = [
    "DELIVERY_ATTEMPTS",
    "LOCAL_CHANNELS",
    "Deliverer",
    "DeliveryError",
    "resolve_delivery",
]

log = logging.getLogger("fermix.jobs")

DELIVERY_ATTEMPTS = 3
#: Surfaces with no way to push a message later: "origin" there means "keep it locally".
LOCAL_CHANNELS = frozenset({"cli", "api", "job"})

PortLookup = Callable[[str], Any]


#: Channel health states in which the adapter can take a message.
SENDABLE_STATES = frozenset({"ready", "degraded"})


def channel_port(service: Any, name: str) -> Any:
    """The reply port of the running channel *name* in *service*, or ``None``.

    The daemon's channel runtime (``service.channels``) keeps one slot per channel with its
    outbound port; only a channel whose adapter is up (ready or degraded) is offered.
    """
    runtime = getattr(service, "channels", None)
    slots = getattr(runtime, "slots", None) or {}
    slot = slots.get(name)
    if slot is None or getattr(slot, "port", None) is None:
        return None
    state = getattr(getattr(slot, "health", None), "state", None)
    return slot.port if state in SENDABLE_STATES else None


class DeliveryError(ValueError):
    """A delivery mode or target that cannot be accepted; the message says what to give."""


def resolve_delivery(
    mode: str | None,
    target: Mapping[str, Any] | None,
    *,
    conversation_key: Any = None,
    local: bool = False,
    channels: Collection[str] = (),
) -> tuple[str, dict[str, Any] | None, str]:
    """``(mode, target, note)`` to store for a job created from this context.

    *mode* ``None`` picks ``origin`` on a chat channel and ``local`` elsewhere. *channels*
    are the channel names this install knows (for ``channel`` targets).
    """
    chat = _chat_of(conversation_key)
    if mode is None:
        mode = "origin" if chat is not None and not local else "local"
    if mode not in DELIVERY_MODES:
        raise DeliveryError(
            f"unknown delivery_mode {mode!r}; use one of {', '.join(DELIVERY_MODES)}"
        )
    if mode in ("none", "local"):
        if target:
            raise DeliveryError(
                f"delivery_target goes only with delivery_mode 'channel'; {mode!r} takes none"
            )
        return mode, None, ""
    if mode == "origin":
        if target:
            raise DeliveryError(
                "delivery_mode 'origin' delivers to this chat and takes no delivery_target; "
                "use delivery_mode 'channel' to name another chat"
            )
        if chat is None or local or chat["channel"] in LOCAL_CHANNELS:
            return (
                "local",
                None,
                "this conversation has no channel to send to later, so results are kept "
                "locally (see `fermix jobs show`)",
            )
        return "origin", chat, ""
    # channel
    if not isinstance(target, Mapping) or not target.get("channel") or not target.get("chat_id"):
        raise DeliveryError(
            "delivery_mode 'channel' needs delivery_target {channel, chat_id[, thread_id]}, "
            "e.g. {'channel': 'telegram', 'chat_id': '12345'}"
        )
    unknown = set(target) - {"channel", "chat_id", "thread_id"}
    if unknown:
        raise DeliveryError(
            f"delivery_target has unknown key(s) {', '.join(sorted(unknown))}; it takes "
            "channel, chat_id and thread_id"
        )
    name = str(target["channel"])
    if name not in channels:
        known = ", ".join(sorted(channels)) or "none installed"
        raise DeliveryError(f"unknown channel {name!r} in delivery_target (known: {known})")
    thread = target.get("thread_id")
    return (
        "channel",
        {
            "channel": name,
            "chat_id": str(target["chat_id"]),
            "thread_id": None if thread is None else str(thread),
        },
        "",
    )


def _chat_of(key: Any) -> dict[str, Any] | None:
    if key is None:
        return None
    channel, chat_id, thread_id = key[0], key[1], key[2] if len(key) > 2 else None
    return {"channel": str(channel), "chat_id": str(chat_id), "thread_id": thread_id}


class Deliverer:
    """Sends a settled run's text to its stored destination and records the outcome."""

    def __init__(
        self,
        store: JobStore,
        ports: PortLookup,
        clock: Clock,
        *,
        attempts: int = DELIVERY_ATTEMPTS,
        base_delay_s: float = 2.0,
    ) -> None:
        self.store = store
        self.ports = ports
        self.clock = clock
        self.attempts = attempts
        self.base_delay_s = base_delay_s

    async def deliver(self, job: JobRecord, run: RunRecord, text: str) -> tuple[str, str | None]:
        mode = run.config.get("delivery_mode", job.delivery_mode)
        target = run.config.get("delivery_target", job.delivery_target)
        if mode == "none":
            return await self._record(run, "none", None, 0)
        if mode == "local" or not text:
            return await self._record(run, "stored", None, 0)
        channel = str((target or {}).get("channel") or "")
        error: str | None = None
        for attempt in range(1, self.attempts + 1):
            port = self.ports(channel) if channel else None
            if port is None:
                error = (
                    f"channel {channel or '?'} has no running adapter, so the result could not "
                    "be sent; it is kept on the run (`fermix jobs show`)"
                )
            else:
                try:
                    await port.send(
                        OutboundMessage(
                            chat_id=str(target["chat_id"]),
                            thread_id=target.get("thread_id"),
                            text=text,
                        )
                    )
                except Exception as exc:
                    error = f"sending to {channel} failed: {type(exc).__name__}: {exc}"
                else:
                    return await self._record(run, "delivered", None, attempt)
            if attempt < self.attempts:
                await self.clock.sleep(self.base_delay_s * 2 ** (attempt - 1))
        log.warning("job %s: run %s was not delivered: %s", job.id, run.id, error)
        return await self._record(run, "failed", error, self.attempts)

    async def _record(
        self, run: RunRecord, status: str, error: str | None, attempts: int
    ) -> tuple[str, str | None]:
        await self.store.record_delivery(run.id, status=status, error=error, attempts=attempts)
        return status, error
