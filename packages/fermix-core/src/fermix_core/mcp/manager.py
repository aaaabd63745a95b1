"""One supervised session per configured MCP server, and the manager that runs them all.

A :class:`ServerRunner` connects (stdio child or Streamable HTTP), initialises, lists the
server's tools and registers them as run-time tools; then it waits until the connection
ends (a crash, the server closing, ``restart``). Whatever ended it, the tools are dropped
and, unless the service is stopping, the runner connects again after a capped backoff.
A server that cannot start is a state (``failed`` with the reason) and a log line; it never
fails the boot, and starting is never awaited by readiness.

The protocol is the official ``mcp`` SDK's; it is imported here, lazily, so a config without
servers never pays for it. Shutdown is the service's task group being cancelled: the SDK's
stdio transport closes stdin, waits briefly, then kills the server's whole process group.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from fermix_core.mcp.names import tool_name
from fermix_core.mcp.tool import McpTool, to_output
from fermix_core.tool import ToolOutput

__all__ = ["McpManager", "McpUnavailable", "ServerRunner"]

log = logging.getLogger("fermix.mcp")

#: First and largest wait between two connection attempts.
BACKOFF_FIRST = 1.0
BACKOFF_CAP = 60.0
#: A session that lasted this long resets the backoff.
STABLE_SECONDS = 60.0
INSTALL_HINT = "install the MCP client with: pip install 'fermix-agent[mcp]'"


class McpUnavailable(RuntimeError):
    """The ``mcp`` SDK is not installed; restarting will not help."""


class ServerRunner:
    """The session of one ``[mcp.servers.<name>]`` and the tools it registered."""

    def __init__(self, name: str, config: Any, manager: McpManager) -> None:
        self.name = name
        self.config = config
        self.manager = manager
        #: ``starting`` → ``ready`` → (``failed`` → ``starting`` …); ``disabled``, ``unavailable``.
        self.state = "starting" if config.enabled else "disabled"
        self.error: str | None = None
        self.tools: dict[str, McpTool] = {}
        #: Tools a name clash kept out, one readable line each.
        self.refused: list[str] = []
        self.restarts = 0
        self.listings = 0
        self.connected_at: float | None = None
        self._session: Any = None
        self._end: anyio.Event | None = None
        self._wake = anyio.Event()
        self._restart_now = False
        self._changed = anyio.Event()
        self._tg: Any = None

    @property
    def transport(self) -> str:
        return "stdio" if self.config.command is not None else "http"

    # ------------------------------------------------------------------ observing

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "error": self.error,
            "tools": sorted(self.tools),
            "refused": list(self.refused),
            "restarts": self.restarts,
        }

    def _set(self, state: str, error: str | None = None) -> None:
        self.state, self.error = state, error
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[ServerRunner], bool]) -> None:
        """Wait until *predicate* holds (checked at every state or tool-list change)."""
        while not predicate(self):
            await self._changed.wait()

    # ------------------------------------------------------------------ control

    def restart(self) -> None:
        """Drop the connection (if any) and connect again now."""
        if self._end is not None:
            self._restart_now = True
            self._end.set()
        else:
            self._wake.set()

    async def serve(self) -> None:
        """Connect, serve, reconnect with capped backoff; returns only if the SDK is missing."""
        delay = BACKOFF_FIRST
        while True:
            began = time.monotonic()
            self._set("starting")
            try:
                await self._session_once()
                reason = "the server closed the connection"
            except McpUnavailable as exc:
                self._set("unavailable", str(exc))
                log.error("mcp server %s cannot start: %s", self.name, exc)
                return
            except Exception as exc:
                reason = _describe(exc)
            finally:
                self._session = None
                self._end = None
                self._drop_tools()
            if self._restart_now:
                self._restart_now = False
                self.restarts += 1
                delay = BACKOFF_FIRST
                log.info("mcp server %s: restarting on request", self.name)
                continue
            if time.monotonic() - began >= STABLE_SECONDS:
                delay = BACKOFF_FIRST
            self._set("failed", reason)
            log.warning("mcp server %s: %s; retrying in %.0f s", self.name, reason, delay)
            self._wake = anyio.Event()
            with anyio.move_on_after(delay):
                await self._wake.wait()
            delay = min(delay * 2, BACKOFF_CAP)
            self.restarts += 1

    # ------------------------------------------------------------------ one session

    async def _session_once(self) -> None:
        try:
            from mcp.client.session import ClientSession
        except ImportError as exc:
            raise McpUnavailable(f"the mcp package is not installed ({INSTALL_HINT})") from exc

        timeout = self.config.timeout_seconds
        async with self._transport() as (read, write), anyio.create_task_group() as tg:
            self._tg = tg
            end = self._end = anyio.Event()
            send, receive = anyio.create_memory_object_stream[Any](16)
            tg.start_soon(_pump, read, send, end)
            async with ClientSession(receive, write, message_handler=self._on_message) as session:
                with anyio.fail_after(timeout):
                    await session.initialize()
                    await self._list(session)
                self._session = session
                self.connected_at = time.monotonic()
                self._set("ready")
                log.info(
                    "mcp server %s ready (%s, %d tools)", self.name, self.transport, len(self.tools)
                )
                await end.wait()
                self._session = None
            tg.cancel_scope.cancel()

    @asynccontextmanager
    async def _transport(self) -> Any:
        if self.config.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            argv = self.config.argv
            env = await anyio.to_thread.run_sync(self.manager.child_env, dict(self.config.env))
            params = StdioServerParameters(
                command=argv[0],
                args=argv[1:],
                env=env,
                cwd=str(self.config.cwd or self.manager.workspace),
                encoding_error_handler="replace",
            )
            with self.manager.errlog(self.name) as errlog:
                async with stdio_client(params, errlog=errlog) as streams:
                    yield streams[0], streams[1]
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            headers = await anyio.to_thread.run_sync(self.manager.headers, self.name)
            async with (
                create_mcp_http_client(headers=headers) as client,
                streamable_http_client(str(self.config.url), http_client=client) as streams,
            ):
                yield streams[0], streams[1]

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            # A line that is not JSON-RPC (a server printing to stdout) is logged, not fatal.
            log.warning("mcp server %s sent something unreadable: %s", self.name, message)
            return
        from mcp import types

        inner = getattr(message, "root", message)
        if isinstance(inner, types.ToolListChangedNotification) and self._tg is not None:
            self._tg.start_soon(self._relist)

    async def _relist(self) -> None:
        session = self._session
        if session is None:
            return
        try:
            with anyio.fail_after(self.config.timeout_seconds):
                await self._list(session)
        except Exception as exc:
            log.warning("mcp server %s: re-listing tools failed: %s", self.name, _describe(exc))

    async def _list(self, session: Any) -> None:
        listed: list[Any] = []
        cursor: str | None = None
        while True:
            if cursor is None:
                page = await session.list_tools()
            else:
                from mcp import types

                page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            listed.extend(page.tools)
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                break
        self._register(listed)

    def _register(self, listed: Sequence[Any]) -> None:
        wanted = [t for t in listed if _selected(t.name, self.config.tools)]
        chosen: dict[str, McpTool] = {}
        refused: list[str] = []
        for remote in wanted:
            name = tool_name(self.name, remote.name)
            if name in chosen:
                refused.append(
                    f"{remote.name}: its name {name} is already used by {chosen[name].remote_name}"
                )
                continue
            chosen[name] = McpTool(name, remote, self)
        self._drop_tools()
        registry = self.manager.capabilities
        for name, built in chosen.items():
            try:
                registry.add_runtime_tool(built, source=f"MCP server {self.name}")
            except ValueError:
                refused.append(f"{built.remote_name}: the name {name} is already taken")
                continue
            self.tools[name] = built
        for line in refused:
            log.warning("mcp server %s: tool refused: %s", self.name, line)
        self.refused = refused
        self.listings += 1
        self._notify()

    def _drop_tools(self) -> None:
        if self.tools:
            self.manager.capabilities.remove_runtime_tools(self.tools)
            self.tools = {}
            self._notify()

    # ------------------------------------------------------------------ calls

    async def call(self, remote: str, arguments: dict[str, Any], *, tool: str) -> ToolOutput:
        """Call *remote* on this server, bounded by ``timeout_seconds``; never raises."""
        session = self._session
        if session is None or self.state != "ready":
            why = self.error or self.state
            return ToolOutput.error(
                f"the MCP server {self.name!r} is not connected ({why}); try again shortly, "
                "or ask the operator to check `fermix mcp list`"
            )
        timeout = self.config.timeout_seconds
        try:
            # The SDK's own read timeout abandons the request (the session stays usable);
            # the outer bound is the backstop for anything else that could stall.
            with anyio.fail_after(timeout + 1.0):
                result = await session.call_tool(remote, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            return _timed_out(tool, timeout)
        except Exception as exc:
            text = _describe(exc)
            if "timed out" in text.lower():
                return _timed_out(tool, timeout)
            return ToolOutput.error(f"{tool} failed on the MCP server {self.name!r}: {text}")
        return to_output(result)


class McpManager:
    """Every configured server's runner, started in the service's task group."""

    def __init__(
        self,
        servers: Mapping[str, Any],
        capabilities: Any,
        *,
        child_env: Callable[[dict[str, str]], dict[str, str]],
        headers: Callable[[str], dict[str, str]],
        workspace: Path,
        logs: Path | None = None,
    ) -> None:
        self.capabilities = capabilities
        self.child_env = child_env
        self.headers = headers
        self.workspace = workspace
        self.logs = logs
        self.runners = {name: ServerRunner(name, cfg, self) for name, cfg in servers.items()}

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run every enabled server until cancelled; reports started at once (never waits)."""
        async with anyio.create_task_group() as tg:
            for runner in self.runners.values():
                if runner.config.enabled:
                    tg.start_soon(runner.serve, name=f"mcp server {runner.name}")
            task_status.started()

    def runner(self, name: str) -> ServerRunner:
        try:
            return self.runners[name]
        except KeyError:
            known = ", ".join(sorted(self.runners)) or "none are configured"
            raise KeyError(f"no MCP server named {name!r} (configured: {known})") from None

    def status(self) -> list[dict[str, Any]]:
        return [runner.status() for _, runner in sorted(self.runners.items())]

    def errlog(self, name: str) -> Any:
        """Where a stdio server's stderr goes: ``logs/mcp-<name>.log`` (appended)."""
        if self.logs is None:
            return open("/dev/null", "w")
        self.logs.mkdir(parents=True, exist_ok=True, mode=0o700)
        return open(self.logs / f"mcp-{name}.log", "a", encoding="utf-8")


def build(
    config: Any, registry: Any, capabilities: Any, *, sandbox: Any, resolver: Any, home: Any
) -> McpManager | None:
    """The service's manager for ``[mcp.servers]`` (``None`` when none is configured).

    A stdio server's environment is the sandbox's minimal child environment plus its
    declared ``env``; a url server's headers are secrets resolved by *resolver*.
    """
    servers = config.core.mcp.servers
    if not servers:
        return None
    from fermix_core.config.slots import secret_fields

    def headers(name: str) -> dict[str, str]:
        prefix = ("mcp", "servers", name, "headers")
        resolved: dict[str, str] = {}
        for slot in secret_fields(config, registry):
            if tuple(slot.path[:4]) != prefix or len(slot.path) != 5:
                continue
            answer = resolver.resolve(slot)
            if answer.value is None:
                problem = answer.problem or "it has no value"
                raise RuntimeError(f"header {slot.path[4]!r} of mcp.servers.{name}: {problem}")
            resolved[slot.path[4]] = answer.value
        return resolved

    return McpManager(
        servers,
        capabilities,
        child_env=sandbox.child_env,
        headers=headers,
        workspace=sandbox.workspace,
        logs=home.path / "logs",
    )


async def _pump(read: Any, send: Any, end: anyio.Event) -> None:
    """Forward the transport's messages to the session; the end of them ends the session."""
    try:
        async with send:
            async for item in read:
                await send.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    finally:
        end.set()


def _selected(name: str, rules: Any) -> bool:
    if rules.allow and not any(fnmatch.fnmatchcase(name, p) for p in rules.allow):
        return False
    return not any(fnmatch.fnmatchcase(name, p) for p in rules.deny)


def _timed_out(tool: str, timeout: float) -> ToolOutput:
    return ToolOutput.error(
        f"{tool} did not answer within {timeout:g} s and was abandoned; try a smaller "
        "request, or ask the operator to raise timeout_seconds for this server"
    )


def _describe(exc: BaseException) -> str:
    """One line for an error, unwrapping task-group exception groups to their first cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
