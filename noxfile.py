"""Project automation. ``nox -l`` lists sessions; CI runs the README test command and ``wheels``."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "tests", "lock"]

ROOT = Path(__file__).parent
PACKAGES = ["fermix-core", "fermix-providers", "fermix-channels", "fermix-tools"]
TEST_DEPS = [
    "pytest>=8.3",
    "pytest-timeout>=2.3",
    "anyio>=4.6",
    # the cron oracle tests: property-based generation, and a second cron implementation
    "hypothesis>=6.100",
    "croniter>=3.0",
    # the Telegram tests check their loopback Bot API with python-telegram-bot's client
    "python-telegram-bot>=22.0",
    # the Discord tests check their loopback gateway and REST with discord.py's client
    "discord.py>=2.4",
]
#: Every first-party entry point that a wheel install must load.
DIST = ROOT / "dist"


def _editable(*names: str) -> list[str]:
    args: list[str] = []
    for name in names:
        args += ["-e", str(ROOT / "packages" / name)]
    return args


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole tree."""
    session.install("ruff>=0.8")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
@nox.parametrize("package", [*PACKAGES, "integration"])
def tests(session: nox.Session, package: str) -> None:
    """One package's tests in an environment holding only that package and what it declares.

    An undeclared import of a sibling package fails here even though the shared workspace
    environment would have hidden it. ``integration`` runs the cross-package tests/ folder
    against every package.
    """
    if package == "integration":
        session.install(*_editable(*PACKAGES), *TEST_DEPS, "ruff>=0.8")  # the docs test lints
        session.run("pytest", "tests", *session.posargs)
        return
    needed = ["fermix-core"] if package == "fermix-core" else ["fermix-core", package]
    session.install(*_editable(*needed), *TEST_DEPS)
    session.run("pytest", f"packages/{package}/tests", *session.posargs)


@nox.session(venv_backend="none")
def lock(session: nox.Session) -> None:
    """uv.lock must match the pyproject files."""
    session.run("uv", "lock", "--check", external=True)


@nox.session(venv_backend="none")
def wheels(session: nox.Session) -> None:
    """Build every wheel without workspace sources, install into a clean venv, check the CLI."""
    shutil.rmtree(DIST, ignore_errors=True)
    session.run(
        "uv", "build", "--all-packages", "--wheel", "--no-sources", "-o", str(DIST), external=True
    )
    wheels_built = sorted(DIST.glob("*.whl"))
    for wheel in wheels_built:
        if wheel.name.startswith("fermix_agent-"):
            continue  # the meta distribution ships no package of its own
        with zipfile.ZipFile(wheel) as archive:
            if not any(name.endswith("/py.typed") for name in archive.namelist()):
                session.error(f"{wheel.name} has no py.typed marker; type checkers would see Any")
    names = {w.name.split("-")[0] for w in wheels_built}
    expected = {"fermix_agent", *(p.replace("-", "_") for p in PACKAGES)}
    if names != expected:
        session.error(f"built wheels {sorted(names)} but expected {sorted(expected)}")
    venv = ROOT / ".nox" / "wheel-install"
    shutil.rmtree(venv, ignore_errors=True)
    session.run("uv", "venv", "--python", "3.11", str(venv), external=True)
    python = str(venv / "bin" / "python")
    # Direct file references: our names must never resolve against an index.
    meta = next(w for w in wheels_built if w.name.startswith("fermix_agent-"))
    others = [str(w) for w in wheels_built if w != meta]
    session.run(
        "uv",
        "pip",
        "install",
        "--python",
        python,
        f"fermix-agent[all] @ {meta.as_uri()}",
        *others,
        external=True,
    )
    fermix = str(venv / "bin" / "fermix")
    session.run(fermix, "--version", external=True)
    session.run(fermix, "--help", external=True, silent=True)
    home = venv / "home"
    out = session.run(
        fermix,
        "plugins",
        "list",
        "--json",
        external=True,
        silent=True,
        env={"FERMIX_HOME": str(home)},
    )
    report = json.loads(out)
    by_dist: dict[str, list[dict]] = {}
    for plugin in report["plugins"]:
        by_dist.setdefault(plugin["distribution"], []).append(plugin)
    bad = [p for p in report["plugins"] if p["status"] != "loaded"]
    if bad or report["errors"]:
        session.error(f"plugins not loaded from the wheel install: {bad} {report['errors']}")
    for package in PACKAGES:
        if package not in by_dist:
            session.error(f"no plugin from {package} was loaded: {sorted(by_dist)}")
    session.log(
        f"{len(report['plugins'])} plugins loaded from wheels: "
        + ", ".join(p["name"] for p in report["plugins"])
    )


@nox.session(venv_backend="none")
def soak(session: nox.Session) -> None:
    """Memory soak: 100,000 turns through the real runtime (not CI); bench/results/soak.json."""
    session.run("uv", "run", "python", "bench/soak.py", *session.posargs, external=True)


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Benchmarks (not part of CI); results go to bench/results/*.json."""
    session.run("uv", "run", "python", "bench/run.py", *session.posargs, external=True)
