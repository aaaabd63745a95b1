"""The CLI channel: ``fermix ask`` (one turn) and ``fermix chat`` (a session).

With a daemon running the request goes over the control socket; without one ``ask`` runs
the same turn in-process. The caller's working directory always travels with the request
(the sandbox admits it for a local operator turn). CLI turns never stream.
"""

from __future__ import annotations

from typing import Any

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.ask_core import LocalSession, Thinking, TurnsFailed, ask_command, run_turns

__all__ = ["LocalSession", "ask_app", "chat_app"]


def _run(coro_fn: Any) -> Any:
    try:
        return run_turns(coro_fn)
    except TurnsFailed as exc:
        raise typer.Exit(exc.code) from exc


ask_app = typer.Typer(help="Ask Fermix one thing and print the reply.", **APP_SETTINGS)
chat_app = typer.Typer(
    help="Chat with Fermix in the terminal (history per session).", **APP_SETTINGS
)


@ask_app.command()
def ask(
    prompt: str = typer.Argument("", help="What to ask; with --stdin, stdin is appended."),
    session: str = typer.Option("default", "--session", "-s", help="Conversation name."),
    stdin: bool = typer.Option(False, "--stdin", help="Read (more of) the prompt from stdin."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    image: list[str] = typer.Option(
        [],
        "--image",
        metavar="PATH",
        help="Attach a local image (PNG, JPEG, GIF, WebP, BMP, TIFF); repeatable.",
    ),
) -> None:
    """Ask Fermix one thing and print the reply."""
    # The same function the entry point's fast path calls without typer (ask_core).
    raise typer.Exit(
        ask_command(prompt, session=session, stdin=stdin, as_json=as_json, images=image)
    )


@chat_app.command()
def chat(
    session: str = typer.Option("default", "--session", "-s", help="Conversation name."),
) -> None:
    """Chat with Fermix in the terminal (history per session).

    /exit or Ctrl-D ends it; slash commands work as in any channel.
    """

    async def main() -> None:
        import anyio

        async with LocalSession(session) as local, anyio.create_task_group() as tg:
            where = "daemon" if local.client is not None else "in-process"
            typer.echo(f"fermix chat — session {session!r} ({where}); /exit to leave")
            tg.start_soon(_print_late, local)
            while True:
                try:
                    line = await anyio.to_thread.run_sync(input, "you> ")
                except EOFError:
                    typer.echo("")
                    break
                if line.strip() in ("/exit", "/quit"):
                    break
                if not line.strip():
                    continue
                with Thinking():
                    result = await local.ask(line)
                typer.echo(f"fermix> {result.get('reply', '')}")
                if line.split()[0] == "/help":
                    # /exit is this terminal's own command; the shared /help cannot know it.
                    typer.echo("        /exit — leave this chat (Ctrl-D works too)")
            tg.cancel_scope.cancel()

    _run(main)


async def _print_late(local: LocalSession) -> None:
    """Print results that arrive while the chat waits (``/background``), as they come."""
    from fermix_core.inbox import MAX_WAIT_SECONDS

    while True:
        for text in await local.late(MAX_WAIT_SECONDS):
            typer.echo(f"\nfermix (later)> {text}")
