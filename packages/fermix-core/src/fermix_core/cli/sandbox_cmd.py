"""``fermix grant path``, ``fermix revoke path`` and ``fermix sandbox show``.

Roots live in ``[sandbox] allowed_roots`` of ``config.toml`` and nowhere else; these
commands are a careful way to edit that list: the path is canonicalised (so ``./x``,
``~/x`` and a symlink to it are one grant), folders no grant may name are refused with the
reason, and the write goes through the config writer (comments kept, whole file validated).
A running daemon reads the file at start, hence the restart reminder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from fermix_core.cli.app import APP_SETTINGS

grant_app = typer.Typer(
    help="Grant the agent a folder (fermix grant path PATH).", no_args_is_help=True, **APP_SETTINGS
)
revoke_app = typer.Typer(
    help="Take a granted folder back (fermix revoke path PATH).",
    no_args_is_help=True,
    **APP_SETTINGS,
)
sandbox_app = typer.Typer(
    help="Show the sandbox: mode, roots, protected paths, commands and environment.",
    no_args_is_help=True,
    **APP_SETTINGS,
)

RESTART_NOTE = "A running daemon keeps its old sandbox until `fermix restart`."


@grant_app.callback()
def _grant_group() -> None:
    """Grant the agent a folder."""


@revoke_app.callback()
def _revoke_group() -> None:
    """Take a granted folder back."""


@sandbox_app.callback()
def _sandbox_group() -> None:
    """Inspect the sandbox."""


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


def _runtime() -> tuple[Any, Any, Any]:
    """``(cli context, loaded config, policy)``; exits with the problems when invalid."""
    from fermix_core.cli import context
    from fermix_core.config.errors import ConfigError
    from fermix_core.config.loader import load_config
    from fermix_core.sandbox import SandboxPolicy

    ctx = context.load_for_cli(validate=False)
    try:
        loaded = load_config(
            ctx.home, ctx.registry, unavailable=ctx.unavailable, environ=ctx.environ
        )
    except ConfigError as exc:
        typer.echo(f"{ctx.home.config_file} is invalid:", err=True)
        for problem in exc.problems:
            typer.echo(f"  {problem}", err=True)
        typer.echo("fix it first (`fermix config validate` lists the problems)", err=True)
        raise typer.Exit(code=1) from None
    from fermix_core.sandbox import approval

    environ = ctx.environ
    approved = approval.check(ctx.home)
    section = approval.effective_section(loaded, approved)
    policy = SandboxPolicy.from_config(
        loaded, Path(ctx.home.path), environ=environ, section=section
    )
    return ctx, loaded, policy


def _apply(kind: str, payload: dict[str, str], ctx: Any, policy: Any) -> Any:
    from fermix_core.config.errors import ConfigError
    from fermix_core.sandbox.grants import GrantError, apply_change

    try:
        return apply_change(
            ctx.home,
            ctx.registry,
            policy,
            kind,
            payload,
            unavailable=ctx.unavailable,
            environ=ctx.environ,
        )
    except GrantError as exc:
        _fail(str(exc))
    except ConfigError as exc:
        typer.echo("error: config.toml would become invalid:", err=True)
        for problem in exc.problems:
            typer.echo(f"  {problem}", err=True)
        raise typer.Exit(code=1) from None


@grant_app.command("path")
def grant_path(
    path: str = typer.Argument(..., help="The folder to grant (relative to here, or ~/…)."),
) -> None:
    """Let the agent read and write PATH (protected paths inside it stay protected)."""
    from fermix_core.sandbox.grants import GrantError, canonical_grant

    ctx, _loaded, policy = _runtime()
    try:
        folder = canonical_grant(policy, path, Path.cwd())
    except GrantError as exc:
        _fail(str(exc))
        return
    edit = _apply("grant", {"path": str(folder)}, ctx, policy)
    typer.echo(f"granted: {folder}")
    typer.echo(edit.diff())
    typer.echo(RESTART_NOTE)


@revoke_app.command("path")
def revoke_path(
    path: str = typer.Argument(..., help="A granted folder (relative to here, or ~/…)."),
) -> None:
    """Take back a folder granted with `fermix grant path` or /sandbox grant."""
    from fermix_core.sandbox.paths import PathProblem, canonical

    ctx, _loaded, policy = _runtime()
    try:
        folder = canonical(path, Path.cwd(), policy.os_home)
    except PathProblem as exc:
        _fail(str(exc))
        return
    edit = _apply("revoke", {"path": str(folder)}, ctx, policy)
    typer.echo(f"revoked: {folder}")
    typer.echo(edit.diff())
    typer.echo(RESTART_NOTE)


@sandbox_app.command("show")
def show(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="List every protected path and every program."
    ),
) -> None:
    """Print the sandbox mode, roots, protected list, command profile and env policy.

    The protected paths are summarised (with counts and examples); --verbose lists each.
    """
    from fermix_core.sandbox import approval

    ctx, _loaded, policy = _runtime()
    info = policy.describe()
    pending = approval.check(ctx.home)
    info["unapproved_changes"] = pending.changes() if pending.pending else []
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo(_render(info, verbose=verbose))


@sandbox_app.command("approve")
def approve(
    yes: bool = typer.Option(False, "--yes", help="Approve without asking."),
) -> None:
    """Apply a [sandbox] change made by editing config.toml directly (shows it first)."""
    from fermix_core.sandbox import approval

    ctx, _loaded, _policy = _runtime()
    state = approval.check(ctx.home)
    if not state.pending:
        typer.echo("nothing to approve: [sandbox] in config.toml is the approved one")
        return
    typer.echo("[sandbox] in config.toml differs from the one you last approved:")
    for line in state.changes():
        typer.echo(f"  {line}")
    if not yes and not typer.confirm("Apply these sandbox settings?", default=False):
        typer.echo("not approved; the daemon keeps running with the approved settings")
        raise typer.Exit(code=1)
    approval.approve_current(ctx.home)
    typer.echo("approved.")
    typer.echo(RESTART_NOTE)


#: The summary's width: the install hint for bubblewrap alone is over 250 characters.
_WIDTH = 100


def _wrapped(label: str, text: str) -> list[str]:
    """*label* and *text* as lines of at most :data:`_WIDTH`, continued under the text."""
    import textwrap

    return textwrap.wrap(
        text,
        width=_WIDTH,
        initial_indent=label,
        subsequent_indent=" " * len(label),
        break_on_hyphens=False,
        break_long_words=False,
    )


def _render(info: dict[str, Any], *, verbose: bool = False) -> str:
    confinement = info["confinement"]
    lines = []
    if info.get("unapproved_changes"):
        lines.append("NOT APPLIED — [sandbox] was changed outside Fermix:")
        lines += [f"  {line}" for line in info["unapproved_changes"]]
        lines.append("  approve with `fermix sandbox approve`, or undo the edit in config.toml")
    lines += [
        f"mode:            {info['mode']}",
        *_wrapped("confinement:     ", f"{confinement['setting']} — {confinement['detail']}"),
    ]
    if confinement["fix"]:
        lines += _wrapped("  to fix:        ", confinement["fix"])
    lines.append(f"  network:       {'on' if confinement['network'] else 'off'}")
    lines += [
        f"workspace:       {info['workspace']}",
        f"granted folders: {', '.join(info['allowed_roots']) or '(none)'}",
    ]
    for ignored in info["ignored_roots"]:
        lines.append(f"ignored grant:   {ignored['path']} — {ignored['reason']}")
    lines.append(f"request folder:  {info['request_directory']}")
    lines.append(f"command profile: {info['command_profile']}")
    programs = info["profile_programs"]
    if isinstance(programs, list):
        listed = ", ".join(programs) if verbose else _sample(programs, width=80)
        lines.append(f"  programs:      {listed}")
    else:
        lines.append(f"  programs:      {programs} (catastrophic commands are still refused)")
    env = info["env"]
    lines.append(f"child env base:  {', '.join(env['base'])}")
    lines.append(f"  allow:         {', '.join(env['allow']) or '(none)'}")
    lines.append(f"  deny:          {', '.join(env['deny']) or '(none)'}")
    shown = [f"{k}={v}" for k, v in env["set"].items()]
    lines.append(f"  set:           {', '.join(shown) or '(none)'}")
    protected, write_protected = info["protected"], info["write_protected"]
    if verbose:
        lines.append("protected (denied in every mode, even inside a granted folder):")
        for entry in protected:
            lines.append(f"  {_entry_path(entry)} — {entry['reason']}")
        lines.append("write-protected (readable, never written):")
        for entry in write_protected:
            lines.append(f"  {entry['path']} — {entry['reason']}")
        return "\n".join(lines)
    lines.append(
        f"protected: {len(protected)} paths, denied in every mode, even inside a granted folder:"
    )
    lines += _protected_summary(info)
    home = info.get("os_home") or ""
    names = [_home_relative(e["path"], home) for e in write_protected]
    lines.append(f"write-protected: {len(write_protected)} paths, readable but never written:")
    lines.append(f"  {_sample(names, width=96)}")
    lines.append("every path and program: `fermix sandbox show --verbose` (or --json)")
    return "\n".join(lines)


def _entry_path(entry: dict[str, Any]) -> str:
    # "exact" entries protect the path itself, not what lies below it ("/" is one).
    return entry["path"] + (
        "" if entry.get("kind", "tree") == "tree" else " (this path only, not below)"
    )


def _sample(names: list[str], *, width: int) -> str:
    """As many of *names* as fit in *width* columns, then how many there are in all."""
    tail = f", … ({len(names)} in all)"
    shown: list[str] = []
    for index, name in enumerate(names):
        candidate = ", ".join([*shown, name])
        last = index == len(names) - 1
        if shown and len(candidate) + (0 if last else len(tail)) > width:
            return ", ".join(shown) + tail
        shown.append(name)
    return ", ".join(shown) or "(none)"


def _home_relative(path: str, home: str) -> str:
    if home and home != "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")) :]
    return path


def _protected_summary(info: dict[str, Any]) -> list[str]:
    """The protected list in groups: Fermix's state, the home's private data, the OS
    directories, then anything else (an unusual entry is listed on its own line)."""
    from fermix_core.sandbox.paths import OS_ROOTS

    fermix_home = info.get("fermix_home") or ""
    home = info.get("os_home") or ""
    groups: dict[str, list[str]] = {"fermix": [], "home": [], "os": []}
    others: list[dict[str, Any]] = []
    for entry in info["protected"]:
        path = entry["path"]
        if fermix_home and (path == fermix_home or path.startswith(fermix_home + "/")):
            groups["fermix"].append(path)
        elif path == "/" or path in OS_ROOTS:
            groups["os"].append(path)
        elif home and home != "/" and path.startswith(home.rstrip("/") + "/"):
            groups["home"].append(_home_relative(path, home))
        else:
            others.append(entry)
    lines = []
    if groups["fermix"]:
        lines.append(f"  Fermix's own state: {fermix_home} (all of it but the workspace)")
    if groups["home"]:
        count = len(groups["home"])
        lines.append(f"  in your home ({count}): credentials, keys, browser profiles, histories")
        lines.append(f"    {_sample(groups['home'], width=94)}")
    if groups["os"]:
        lines.append(f"  operating system ({len(groups['os'])}): {_sample(groups['os'], width=70)}")
    lines += [f"  {_entry_path(entry)} — {entry['reason']}" for entry in others]
    return lines
