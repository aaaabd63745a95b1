"""The CLI channel: ``fermix ask`` (one turn) and ``fermix chat`` (a session).

With a daemon running the request goes over the control socket; without one ``ask`` runs
the same turn in-process. The caller's working directory always travels with the request
(the sandbox admits it for a local operator turn). CLI turns never stream.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json

ask_app = typer.Typer(help="Ask Fermix one thing and print the reply.", **APP_SETTINGS)
chat_app = typer.Typer(
    help="Chat with Fermix in the terminal (history per session).", **APP_SETTINGS
)


class LocalSession:
    """One CLI conversation, over the daemon socket when one answers, else in-process."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.cwd = os.getcwd()

    async def __aenter__(self) -> LocalSession:
        from contextlib import AsyncExitStack

        from fermix_core.daemon.client import DaemonClient, DaemonUnavailable
        from fermix_core.home import FermixHome

        self._stack = AsyncExitStack()
        home = FermixHome.resolve()
        self.client = None
        self.embedded = None
        if home.daemon_sock.exists():
            try:
                self.client = await self._stack.enter_async_context(DaemonClient(home.daemon_sock))
            except DaemonUnavailable:
                self.client = None
        if self.client is None:
            from fermix_core.api import Fermix

            self.embedded = await self._stack.enter_async_context(Fermix.open())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def ask(self, text: str) -> dict[str, Any]:
        if self.client is not None:
            return await self.client.call(
                "ask", {"text": text, "session": self.session, "cwd": self.cwd}
            )
        outcome = await self.embedded.ask(text, session=self.session, cwd=self.cwd)
        return outcome.as_dict()


def _run(coro_fn: Any) -> Any:
    import anyio

    from fermix_core.config import ConfigError

    try:
        return anyio.run(coro_fn)
    except ConfigError as exc:
        typer.echo(f"config.toml is not valid — fix it, then retry:\n{exc}", err=True)
        raise typer.Exit(1) from exc


@ask_app.command()
def ask(
    prompt: str = typer.Argument("", help="What to ask; with --stdin, stdin is appended."),
    session: str = typer.Option("default", "--session", "-s", help="Conversation name."),
    stdin: bool = typer.Option(False, "--stdin", help="Read (more of) the prompt from stdin."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Ask Fermix one thing and print the reply."""
    text = prompt
    if stdin:
        piped = sys.stdin.read()
        text = f"{prompt}\n\n{piped}".strip() if prompt else piped.strip()
    if not text.strip():
        typer.echo("nothing to ask: give a prompt or pipe one with --stdin", err=True)
        raise typer.Exit(2)

    async def main() -> dict[str, Any]:
        async with LocalSession(session) as local:
            return await local.ask(text)

    result = _run(main)
    if as_json:
        print_json(result)
    else:
        typer.echo(result.get("reply", ""))
    if result.get("status") in ("error", "no_provider"):
        raise typer.Exit(1)


@chat_app.command()
def chat(
    session: str = typer.Option("default", "--session", "-s", help="Conversation name."),
) -> None:
    """Chat with Fermix in the terminal (history per session).

    /exit or Ctrl-D ends it; slash commands work as in any channel.
    """

    async def main() -> None:
        import anyio

        async with LocalSession(session) as local:
            where = "daemon" if local.client is not None else "in-process"
            typer.echo(f"fermix chat — session {session!r} ({where}); /exit to leave")
            while True:
                try:
                    line = await anyio.to_thread.run_sync(input, "you> ")
                except EOFError:
                    typer.echo("")
                    return
                if line.strip() in ("/exit", "/quit"):
                    return
                if not line.strip():
                    continue
                result = await local.ask(line)
                typer.echo(f"fermix> {result.get('reply', '')}")

    _run(main)
