"""Daemon lifecycle: ``run``, ``start``, ``stop``, ``restart``, ``status``, ``health``, ``logs``.

Exit codes (documented in docs/cli.md): 0 success / running / healthy; 1 failure or
unhealthy; 3 no daemon is running (``status``, ``health``, ``stop``).
"""

from __future__ import annotations

import sys
import time

import typer

from fermix_core.cli.app import APP_SETTINGS
from fermix_core.cli.output import print_json
from fermix_core.cli.run_core import error_reason, run_foreground

NOT_RUNNING = 3

run_app = typer.Typer(help="Run the daemon in the foreground (Ctrl-C stops it).", **APP_SETTINGS)
start_app = typer.Typer(help="Start the daemon in the background.", **APP_SETTINGS)
stop_app = typer.Typer(help="Stop the running daemon.", **APP_SETTINGS)
restart_app = typer.Typer(help="Restart the daemon (applies config and upgrades).", **APP_SETTINGS)
status_app = typer.Typer(
    help="Show whether the daemon runs, its version and providers.", **APP_SETTINGS
)
health_app = typer.Typer(help="Ask the running daemon whether it is healthy.", **APP_SETTINGS)
logs_app = typer.Typer(help="Show the daemon log (-f to follow).", **APP_SETTINGS)


def _home():
    from fermix_core.home import FermixHome

    return FermixHome.resolve()


@run_app.command()
def run() -> None:
    """Run the daemon in the foreground (Ctrl-C stops it)."""
    raise typer.Exit(run_foreground())


def _start(home) -> int:
    from fermix_core.daemon.process import StartError, current_state, start_detached

    state = current_state(home.pid_file, home.daemon_sock)
    if state.running:
        typer.echo(
            f"the daemon is already running (pid {state.pid}); it keeps the settings it "
            "started with — `fermix restart` applies config changes"
        )
        return state.pid or 0
    home.ensure()
    try:
        pid = start_detached(home.logs / "daemon.out")
    except StartError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"daemon started (pid {pid})")
    return pid


@start_app.command()
def start() -> None:
    """Start the daemon in the background."""
    _start(_home())


def _stop(home) -> bool:
    from fermix_core.daemon.process import current_state, read_pidfile, stop_process

    state = current_state(home.pid_file, home.daemon_sock)
    if not state.running:
        return False
    info = read_pidfile(home.pid_file)
    how = stop_process(info) if info else "not running"
    typer.echo(f"daemon {how} (pid {state.pid})")
    return True


@stop_app.command()
def stop() -> None:
    """Stop the running daemon.

    Sends SIGTERM to the exact daemon process and escalates to SIGKILL after 10 s.
    Exits 3 when no daemon is running.
    """
    if not _stop(_home()):
        typer.echo("no daemon is running")
        raise typer.Exit(NOT_RUNNING)


def _preflight() -> str | None:
    """Why a new daemon could not boot with the files as they are now, or ``None``.

    The same strict boot the daemon runs first (plugins, the whole config, auth.json's
    mode), done here so a typo never costs the running daemon.
    """
    from fermix_core.runtime import Runtime

    try:
        Runtime.boot()
    except Exception as exc:
        return error_reason(exc)
    return None


@restart_app.command()
def restart() -> None:
    """Restart the daemon (applies config and upgrades).

    The new configuration is checked first; when it cannot boot, the running daemon is
    kept and the command exits 1 with the reason.
    """
    from fermix_core.daemon.process import current_state

    home = _home()
    state = current_state(home.pid_file, home.daemon_sock)
    problem = _preflight()
    if problem is not None:
        kept = f"; the running daemon (pid {state.pid}) was kept" if state.running else ""
        typer.echo(
            f"error: the daemon cannot start with the current files: {problem}{kept}", err=True
        )
        typer.echo(
            "fix it (`fermix config validate`, `fermix doctor`), then restart again", err=True
        )
        raise typer.Exit(1)
    _stop(home)
    _start(home)


def _daemon_call(method: str) -> dict | None:
    import anyio

    from fermix_core.daemon.client import DaemonClient, DaemonUnavailable

    home = _home()

    async def call() -> dict:
        async with DaemonClient(home.daemon_sock) as client:
            return {"hello": client.hello, "result": await client.call(method)}

    try:
        return anyio.run(call)
    except DaemonUnavailable:
        return None


@status_app.command()
def status(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Show whether the daemon runs, its version and providers.

    Exits 3 when no daemon runs; warns when the running daemon's version differs from
    the installed one (restart to apply).
    """
    from fermix_core import __version__
    from fermix_core.daemon.process import current_state

    home = _home()
    state = current_state(home.pid_file, home.daemon_sock)
    answer = _daemon_call("status") if state.running else None
    if answer is None:
        if as_json:
            print_json({"running": False, "cleaned": list(state.cleaned)})
        else:
            typer.echo("daemon: not running")
            for path in state.cleaned:
                typer.echo(f"removed stale {path}")
        raise typer.Exit(NOT_RUNNING)
    result = answer["result"]
    stale = result.get("version") != __version__
    if as_json:
        print_json(
            {"running": True, "installed_version": __version__, "version_mismatch": stale, **result}
        )
        return
    typer.echo(f"daemon: running (pid {result['pid']}, version {result['version']})")
    typer.echo(f"primary_provider: {result.get('primary_provider') or 'none — run `fermix setup`'}")
    fallbacks = result.get("fallback_providers") or []
    typer.echo(f"fallback_providers: {', '.join(fallbacks) or 'none'}")
    _echo_channels(result)
    if stale:
        typer.echo(
            f"warning: the running daemon is version {result['version']} but {__version__} is "
            "installed — restart to apply (`fermix restart`)",
            err=True,
        )


def _echo_channels(result: dict) -> None:
    http = result.get("http") or {}
    if http.get("url"):
        typer.echo(f"http: {http['url']}")
    elif http.get("error"):
        typer.echo(f"http: not listening — {http['error']}")
    enabled = [c for c in result.get("channels") or [] if c.get("enabled")]
    if not enabled:
        typer.echo("channels: none enabled")
        return
    typer.echo("channels:")
    for channel in enabled:
        error = f" — {channel['error']}" if channel.get("error") else ""
        typer.echo(f"  {channel['name']}: {channel['state']}{error}")


@health_app.command()
def health(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Ask the running daemon whether it is healthy.

    Exits 0 when healthy, 1 when unhealthy and 3 when no daemon runs.
    """
    answer = _daemon_call("health")
    if answer is None:
        if as_json:
            print_json({"running": False})
        else:
            typer.echo("daemon: not running")
        raise typer.Exit(NOT_RUNNING)
    result = answer["result"]
    if as_json:
        print_json(result)
    else:
        typer.echo("healthy" if result.get("ok") else "unhealthy")
    if not result.get("ok"):
        raise typer.Exit(1)


@logs_app.command()
def logs(
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
    lines: int = typer.Option(50, "--lines", "-n", help="How many recent lines to show first."),
) -> None:
    """Show the daemon log (-f to follow)."""
    path = _home().logs / "fermix.log"
    # Every command opens the log, so an empty file is a home where nothing was logged yet.
    if not path.exists() or (not follow and path.stat().st_size == 0):
        typer.echo(f"no log yet at {path}", err=True)
        raise typer.Exit(1)
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for line in handle.readlines()[-lines:]:
            sys.stdout.write(line)
        sys.stdout.flush()
        while follow:
            line = handle.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.25)  # tailing a file has no event to wait on portably
