"""Where the skills that ship with Fermix live on disk.

The bundled ``SKILL.md`` packages are kept once, at the repository root (``skills/``), so
that they are easy to edit and review. A wheel build force-includes that directory as
``fermix_core/_bundled_skills``; an editable workspace install has no such copy and reads
the repository directory directly. This module hides that difference so the skills loader
and ``fermix doctor`` never have to know how Fermix was installed.
"""

from __future__ import annotations

from pathlib import Path

#: Directory name of the bundled skills inside an installed ``fermix_core`` package.
INSTALLED_DIRNAME = "_bundled_skills"


class BundledSkillsMissingError(FileNotFoundError):
    """Neither the installed copy nor the repository's ``skills/`` directory exists.

    This means a broken install (a wheel built without the force-include, or a source tree
    with ``skills/`` removed); reinstalling ``fermix-core`` is the fix.
    """


def bundled_skills_dir(package_dir: Path | None = None) -> Path:
    """Return the directory holding the bundled skill packages.

    The installed copy wins because a wheel install is what users run; the repository
    fallback exists for the editable workspace, where ``fermix_core`` is imported from
    ``packages/fermix-core/src/fermix_core`` and the skills sit four levels up.

    *package_dir* is the ``fermix_core`` package directory; it defaults to this module's
    own and is a parameter only so both layouts can be exercised with real directories.
    """
    package = (package_dir or Path(__file__).parent).resolve()
    installed = package / INSTALLED_DIRNAME
    if installed.is_dir():
        return installed
    # <repo>/packages/fermix-core/src/fermix_core -> <repo>/skills
    parents = package.parents
    if len(parents) >= 4:
        repository = parents[3] / "skills"
        if repository.is_dir():
            return repository
    raise BundledSkillsMissingError(
        f"bundled skills not found: neither {installed} nor a repository 'skills/' directory "
        "exists; reinstall fermix-core (its wheel ships fermix_core/_bundled_skills)"
    )
