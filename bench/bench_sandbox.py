"""Sandbox decision cost: ``SandboxPolicy.resolve`` per path and ``check_command`` per command.

Every file tool call pays one ``resolve`` before any I/O and every shell call one
``check_command``, so these are per-tool-call costs. Measured on a real temporary tree
(canonicalisation touches the file system: symlinks are resolved, missing write targets are
resolved through their nearest existing parent).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

RUNS = 2000


def _timed(fn, runs: int = RUNS) -> dict:
    for _ in range(50):
        fn()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return {
        "n": runs,
        "p50_us": round(statistics.median(samples), 2),
        "p95_us": round(samples[int(0.95 * (runs - 1))], 2),
    }


def run() -> dict:
    from fermix_core.boot import assemble
    from fermix_core.home import FermixHome
    from fermix_core.sandbox import SandboxDenied, SandboxPolicy
    from fermix_core.sandbox.commands import CommandRefused
    from fermix_core.tool import ToolContext, Trust

    root = Path(tempfile.mkdtemp(prefix="fermix-bench-sandbox-"))
    os_home = root / "home"
    (os_home / ".ssh").mkdir(parents=True)
    (os_home / ".ssh" / "id_ed25519").write_text("key")
    project = os_home / "code" / "project" / "src" / "pkg"
    project.mkdir(parents=True)
    (project / "module.py").write_text("x = 1\n")
    (os_home / "code" / "project" / "escape").symlink_to(os_home / ".ssh")
    home = FermixHome(os_home / ".fermix")
    home.ensure()
    config = assemble(home, environ={"FERMIX_HOME": str(home.path)}, config={}).load_config()
    policy = SandboxPolicy.from_config(config, home.path, os_home=os_home, environ={})
    policy = policy.evolve(allowed_roots=(os_home / "code",))
    ctx = ToolContext(trust=Trust.OPERATOR, cwd=os_home / "code", home=home, local=True)

    def allowed() -> None:
        policy.resolve(project / "module.py", ctx)

    def relative_dotdot() -> None:
        policy.resolve("project/src/pkg/../pkg/module.py", ctx)

    def new_file() -> None:
        policy.resolve(project / "new_dir" / "new.py", ctx, write=True)

    def denied(path: object) -> None:
        try:
            policy.resolve(path, ctx)
        except SandboxDenied:
            return
        raise AssertionError(f"{path} was not refused")

    def command(text: str, refused: bool) -> None:
        try:
            policy.check_command(text)
        except CommandRefused:
            if not refused:
                raise
            return
        if refused:
            raise AssertionError(f"{text!r} was not refused")

    return {
        "resolve": {
            "allowed_file": _timed(allowed),
            "relative_with_dotdot": _timed(relative_dotdot),
            "new_write_target": _timed(new_file),
            "protected_ssh_key": _timed(lambda: denied(os_home / ".ssh" / "id_ed25519")),
            "symlink_into_ssh": _timed(
                lambda: denied(os_home / "code" / "project" / "escape" / "id_ed25519")
            ),
            "os_root": _timed(lambda: denied("/etc/passwd")),
        },
        "check_command": {
            "simple": _timed(lambda: command("ls -la src", False)),
            "pipeline": _timed(
                lambda: command("git log --oneline | head -20 && rg TODO src", False)
            ),
            "rm_rf_root_wrapped": _timed(lambda: command("sudo env X=1 sh -c 'rm -rf /'", True)),
            "fork_bomb": _timed(lambda: command(":(){ :|:& };:", True)),
        },
        "cpus": os.cpu_count(),
    }
