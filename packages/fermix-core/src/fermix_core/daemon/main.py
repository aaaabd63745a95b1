"""``fermix run``: the daemon in the foreground, serving the control socket until told to stop."""

from __future__ import annotations

import gc
import logging
import os
import signal
from pathlib import Path
from typing import Any

import anyio

from fermix_core import __version__
from fermix_core.daemon.process import remove_pidfile, report_ready, write_pidfile
from fermix_core.daemon.server import ControlServer, MethodError

log = logging.getLogger("fermix.daemon")


async def serve() -> int:
    from fermix_core.runtime import Runtime
    from fermix_core.service import FermixService

    try:
        runtime = Runtime.boot()
    except Exception as exc:
        report_ready(f"error: {exc}")
        raise
    home = runtime.home
    stop = anyio.Event()
    async with FermixService.running(runtime, scheduler=True) as service:
        failures = await runtime.start()
        for plugin, error in failures:
            log.error("plugin %s failed to start: %s", plugin, error)
        handlers = _handlers(service, stop)
        server = ControlServer(home.daemon_sock, handlers)
        async with anyio.create_task_group() as tg:
            try:
                await tg.start(server.serve)
            except Exception as exc:
                report_ready(f"error: {exc}")
                raise
            write_pidfile(home.pid_file, home.daemon_sock)
            log.info(
                "fermix %s daemon ready (pid %s) on %s", __version__, os.getpid(), home.daemon_sock
            )
            report_ready()
            # Everything built at boot lives for the whole run: move it out of the collector's
            # sight so full collections stop re-walking it (they caused 30-50 ms turn spikes).
            gc.collect()
            gc.freeze()
            tg.start_soon(_watch_signals, stop)
            await stop.wait()
            log.info("daemon stopping")
            service.available = False
            tg.cancel_scope.cancel()
        await runtime.stop()
    remove_pidfile(home.pid_file, os.getpid())
    return 0


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop.set()
            return


def _handlers(service: Any, stop: anyio.Event) -> dict[str, Any]:
    async def status(params: dict[str, Any]) -> dict[str, Any]:
        return {"pid": os.getpid(), "version": __version__, **service.status()}

    async def health(params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": service.available, "version": __version__}

    async def ask(params: dict[str, Any]) -> dict[str, Any]:
        text = params.get("text")
        if not isinstance(text, str):
            raise MethodError("bad_params", "ask needs a 'text' string")
        session = str(params.get("session") or "default")
        cwd = params.get("cwd")
        outcome = await service.ask(
            text, session=session, cwd=Path(cwd) if isinstance(cwd, str) else None
        )
        return outcome.as_dict()

    async def capabilities(params: dict[str, Any]) -> dict[str, Any]:
        from fermix_core.cli.capabilities import describe_capabilities

        return describe_capabilities(service.runtime.registry)

    async def shutdown(params: dict[str, Any]) -> dict[str, Any]:
        stop.set()
        return {"stopping": True, "pid": os.getpid()}

    from fermix_core.jobs.control import control_handlers

    jobs = control_handlers(lambda: service.jobs.service if service.jobs else None, MethodError)
    return {
        "status": status,
        "health": health,
        "ask": ask,
        "capabilities": capabilities,
        "shutdown": shutdown,
        **jobs,
    }
