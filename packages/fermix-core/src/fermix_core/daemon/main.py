"""``fermix run``: the daemon in the foreground, serving the control socket until told to stop."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from fermix_core import __version__
from fermix_core.daemon.process import current_state, remove_pidfile, report_ready, write_pidfile
from fermix_core.daemon.server import ControlServer, DaemonAlreadyRunning, MethodError

log = logging.getLogger("fermix.daemon")


async def serve(on_ready: Callable[[str], None] | None = None) -> int:
    """Boot, serve the control socket until SIGTERM/SIGINT or ``shutdown``; returns 0.

    *on_ready* gets one human line (socket, channels, how to talk to it) once the socket
    listens; ``fermix run`` prints it. A daemon already running for this home is refused
    with :class:`DaemonAlreadyRunning` before anything is booted.
    """
    from fermix_core.channels.runtime import daemon_channels
    from fermix_core.home import FermixHome
    from fermix_core.runtime import Runtime, settle_after_boot
    from fermix_core.service import FermixService

    try:
        refuse_if_running(FermixHome.resolve())
        runtime = Runtime.boot()
    except Exception as exc:
        report_ready(f"error: {exc}")
        raise
    home = runtime.home
    stop = anyio.Event()
    async with (
        FermixService.running(runtime, scheduler=True) as service,
        runtime.serving(service) as failures,
        AsyncExitStack() as channels,
    ):
        for plugin, error in failures:
            log.error("plugin %s failed to start: %s", plugin, error)
        # Channels start once the gateway is ready and stop before the plugins' shutdown.
        await channels.enter_async_context(daemon_channels(runtime, service))
        handlers = _handlers(service, stop)
        server = ControlServer(home.daemon_sock, handlers)
        async with anyio.create_task_group() as tg:
            try:
                await tg.start(server.serve)
            except Exception as exc:
                report_ready(f"error: {exc}")
                raise
            # SIGTERM/SIGINT are ours before anyone is told we are ready, so a stop sent
            # right after the ready line is a clean shutdown, never the default kill.
            await tg.start(_watch_signals, stop)
            write_pidfile(home.pid_file, home.daemon_sock)
            log.info(
                "fermix %s daemon ready (pid %s) on %s", __version__, os.getpid(), home.daemon_sock
            )
            report_ready()
            if on_ready is not None:
                on_ready(ready_line(runtime, service))
            # Everything built at boot lives for the whole run: move it out of the collector's
            # sight so full collections stop re-walking it (they caused 30-50 ms turn spikes).
            settle_after_boot()
            await stop.wait()
            log.info("daemon stopping")
            service.available = False
            tg.cancel_scope.cancel()
        await channels.aclose()
        await runtime.stop()  # fermix_shutdown now; the plugins' tasks end with the block
    remove_pidfile(home.pid_file, os.getpid())
    return 0


def refuse_if_running(home: Any) -> None:
    """Raise :class:`DaemonAlreadyRunning` naming the pid when this home has a live daemon."""
    state = current_state(home.pid_file, home.daemon_sock)
    if state.running:
        raise DaemonAlreadyRunning(
            f"a daemon is already running (pid {state.pid}); "
            "stop it with `fermix stop`, or apply changes with `fermix restart`"
        )


def cli_prefix(environ: Mapping[str, str] | None = None) -> str:
    """How the user types the command: ``uv run fermix`` when this process came from
    ``uv run`` (the clone's venv is not on their PATH), else ``fermix``."""
    env = os.environ if environ is None else environ
    return "uv run fermix" if env.get("UV_RUN_RECURSION_DEPTH") else "fermix"


def ready_line(runtime: Any, service: Any) -> str:
    """One line for the terminal: where the daemon listens and how to reach it."""
    from fermix_core.specs import ChannelSpec

    configured = {
        name
        for name in runtime.registry.typed(ChannelSpec)
        if runtime.config.section(f"fermix_channels.{name}") is not None
    }
    running = getattr(service, "channels", None)
    if running is not None:
        # Configured channels with their state, and any default-on one that actually runs.
        channels = [
            f"{h['name']} {h['state']}"
            for h in running.health()
            if h["enabled"] and (h["name"] in configured or h["state"] in ("ready", "starting"))
        ]
    else:
        channels = sorted(configured)
    ingress = getattr(service, "ingress", None)
    http = f"; http: {ingress.url}" if ingress is not None and ingress.url else ""
    plan = getattr(service, "routes", None)
    provider = plan.primary.name if plan is not None and plan.primary is not None else None
    cli = cli_prefix(runtime.environ)
    return (
        f"fermix {__version__} ready (pid {os.getpid()}) on {runtime.home.daemon_sock}; "
        f"channels: {', '.join(channels) or 'none configured (terminal only)'}{http}; "
        f"provider: {provider or f'none — run `{cli} setup`'}. "
        f'Talk to it from another terminal with `{cli} ask "hello"` or `{cli} chat`; '
        "Ctrl-C stops it."
    )


async def _watch_signals(
    stop: anyio.Event, *, task_status: Any = anyio.TASK_STATUS_IGNORED
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
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
        images = params.get("images") or []
        if not isinstance(images, list) or not all(isinstance(p, str) for p in images):
            raise MethodError("bad_params", "ask 'images' must be a list of file paths")
        outcome = await service.ask(
            text,
            session=session,
            cwd=Path(cwd) if isinstance(cwd, str) else None,
            images=[Path(p) for p in images],
        )
        return outcome.as_dict()

    async def inbox(params: dict[str, Any]) -> dict[str, Any]:
        """Late results for a CLI session (``/background``); a bounded long poll."""
        from fermix_core.inbox import MAX_WAIT_SECONDS

        session = str(params.get("session") or "default")
        wait = params.get("wait", 0)
        if not isinstance(wait, int | float) or isinstance(wait, bool) or wait < 0:
            raise MethodError("bad_params", "inbox 'wait' must be a number of seconds")
        messages = await service.inbox.take(session, wait=min(float(wait), MAX_WAIT_SECONDS))
        return {"session": session, "messages": messages}

    async def capabilities(params: dict[str, Any]) -> dict[str, Any]:
        from fermix_core.cli.capabilities import describe_capabilities

        return describe_capabilities(service.runtime.registry)

    async def shutdown(params: dict[str, Any]) -> dict[str, Any]:
        stop.set()
        return {"stopping": True, "pid": os.getpid()}

    from fermix_core.jobs.control import control_handlers

    jobs = control_handlers(lambda: service.jobs.service if service.jobs else None, MethodError)
    from fermix_core.skills.control import control_handlers as skill_handlers

    jobs.update(skill_handlers(lambda: service.skills, MethodError))
    from fermix_core.mcp.control import control_handlers as mcp_handlers

    jobs.update(mcp_handlers(lambda: service.mcp, MethodError))
    return {
        "status": status,
        "health": health,
        "ask": ask,
        "inbox": inbox,
        "capabilities": capabilities,
        "shutdown": shutdown,
        **jobs,
    }
