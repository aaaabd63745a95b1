"""``fermix acp``: an ACP client (an editor) launches this; it bridges to the daemon.

Standard input and output are copied byte for byte to and from ``$FERMIX_HOME/acp.sock``,
where the daemon's ``acp`` channel speaks the Agent Client Protocol; the bridge never parses
a message, so it adds no framing of its own and costs one copy each way. With no daemon
running it says so on standard error, with how to start one, and exits 3: an editor shows
that text, and an agent that quietly ran in-process would lose every other channel's view
of the conversation and the daemon's queue.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket
import sys

import typer

from fermix_core.cli.app import APP_SETTINGS

NOT_RUNNING = 3
CHUNK = 65536

acp_app = typer.Typer(
    help="Serve the Agent Client Protocol on stdin/stdout (editors launch this).",
    **APP_SETTINGS,
)


def _connect(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def bridge(sock: socket.socket, stdin: int, stdout: int) -> None:
    """Copy *stdin* → *sock* and *sock* → *stdout* until the daemon's side closes.

    Standard input reaching its end half-closes the socket, so a reply already on its way
    is still delivered before the bridge exits.
    """
    selector = selectors.DefaultSelector()
    selector.register(stdin, selectors.EVENT_READ, "in")
    selector.register(sock, selectors.EVENT_READ, "sock")
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "in":
                    data = os.read(stdin, CHUNK)
                    if not data:
                        selector.unregister(stdin)
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_WR)
                        continue
                    sock.sendall(data)
                else:
                    data = sock.recv(CHUNK)
                    if not data:
                        return
                    _write_all(stdout, data)
    finally:
        selector.close()


@acp_app.command()
def acp() -> None:
    """Serve the Agent Client Protocol on stdin/stdout (editors launch this).

    It bridges to the running daemon's ACP socket. Point an ACP client at this command
    (Zed: `agent_servers` with command "fermix", args ["acp"]). The daemon must be running
    (`fermix start`); the ACP surface is on by default. Exits 3 when no daemon is running.
    """
    from fermix_core.daemon.process import current_state
    from fermix_core.home import FermixHome

    home = FermixHome.resolve()
    path = str(home.acp_sock)
    sock = _connect(path)
    if sock is None:
        state = current_state(home.pid_file, home.daemon_sock)
        if not state.running:
            typer.echo(
                f"fermix acp: no Fermix daemon is running for {home.path}; start it with "
                "`fermix start` (or `fermix run` in a terminal), then reconnect",
                err=True,
            )
        else:
            typer.echo(
                f"fermix acp: the daemon (pid {state.pid}) does not serve ACP at {path}; set "
                "enabled = true in [fermix_channels.acp], install fermix-channels[acp], and "
                "run `fermix restart` (`fermix status` shows the channel's state)",
                err=True,
            )
        raise typer.Exit(NOT_RUNNING)
    try:
        bridge(sock, sys.stdin.fileno(), sys.stdout.fileno())
    except BrokenPipeError:
        pass  # the editor closed our standard output: nothing left to tell it
    except OSError as exc:
        if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
            raise
    finally:
        sock.close()
