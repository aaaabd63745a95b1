"""Core's own ``fermix doctor`` rows. Registered by :mod:`fermix_core.builtin_plugin`."""

from __future__ import annotations

from fermix_core import install_hint
from fermix_core.doctor import CheckResult, DoctorContext, Status


def check_config(ctx: DoctorContext) -> list[CheckResult]:
    path = ctx.home.config_file
    if ctx.config_error is not None:
        return [
            CheckResult(
                "config.toml",
                Status.FAIL,
                str(ctx.config_error),
                fix=f"edit {path} or use `fermix config set`, then `fermix config validate`",
            )
        ]
    if ctx.config is None:
        return [CheckResult("config.toml", Status.SKIP, "not loaded")]
    rows = [
        CheckResult(
            "config.toml",
            Status.OK,
            f"valid ({path})" if path.exists() else f"no file yet; defaults in use ({path})",
            fix=None if path.exists() else "run `fermix setup`",
        )
    ]
    for warning in ctx.config.warnings:
        rows.append(
            CheckResult(
                f"config [{warning.path}]",
                Status.WARN,
                warning.message,
                fix="fix or re-enable the plugin that owns this section, or remove the section",
            )
        )
    return rows


def check_plugins(ctx: DoctorContext) -> list[CheckResult]:
    ctx.registry.check_tool_schemas()
    records = ctx.host.records
    loaded = [r for r in records if r.status == "loaded"]
    rows = [CheckResult("plugins", Status.OK, f"{len(loaded)} loaded of {len(records)}")]
    for record in records:
        if record.status in ("failed", "conflict"):
            rows.append(
                CheckResult(
                    f"plugin {record.name}",
                    Status.FAIL,
                    f"{record.source}: {record.error}",
                    fix="upgrade or uninstall the distribution, or add it to "
                    "[fermix_core.plugins] disabled",
                )
            )
        elif record.status == "loaded" and record.warning:
            rows.append(
                CheckResult(
                    f"plugin {record.name}", Status.WARN, f"{record.source} {record.warning}"
                )
            )
        elif record.status == "blocked":
            rows.append(
                CheckResult(f"plugin {record.name}", Status.WARN, record.error or "blocked")
            )
        elif record.status == "disabled":
            rows.append(CheckResult(f"plugin {record.name}", Status.OK, "disabled in config.toml"))
    if not ctx.registry.of("tool"):
        rows.append(
            CheckResult(
                "tools",
                Status.WARN,
                "no tool plugin is loaded: the agent can only talk (no files, shell, web or "
                "memory tools)",
                fix=f"install the built-in tools ({install_hint()} includes them, or pip install "
                '"fermix-tools"), or check FERMIX_LOAD_PLUGINS and [fermix_core.plugins] disabled',
            )
        )
    rows.extend(_unresolvable_references(ctx))
    for error in ctx.registry.errors:
        rows.append(
            CheckResult(
                f"plugin specs ({error.kind})",
                Status.FAIL,
                str(error),
                fix="report it to the plugin's author or disable one of the plugins named",
            )
        )
    return rows


def _unresolvable_references(ctx: DoctorContext) -> list[CheckResult]:
    """Import every ``pkg.module:attr`` a registered spec names (factory, argument and config
    models, handlers), so a typo is found here rather than when the model first calls it.

    Channels are left to the channel rows, which check only enabled channels (a disabled
    channel may lack its extra on purpose).
    """
    import dataclasses

    from fermix_core.specs import SPEC_KINDS, resolve_ref

    rows: list[CheckResult] = []
    checked = 0
    for kind in SPEC_KINDS:
        if kind == "channel":
            continue
        for spec in ctx.registry.of(kind).values():
            for item in dataclasses.fields(spec):
                ref = getattr(spec, item.name)
                if not isinstance(ref, str) or "Ref" not in str(item.type):
                    continue
                checked += 1
                try:
                    resolve_ref(ref)
                except Exception as exc:  # any import-time failure is the finding
                    source = ctx.registry.source_of(spec) or "?"
                    cause = exc.__cause__ or exc  # resolve_ref wraps the import error
                    missing = getattr(cause, "name", None)
                    own = ref.partition(":")[0]
                    extra = (
                        isinstance(cause, ModuleNotFoundError)
                        and missing is not None
                        and not own.startswith(missing)
                    )
                    rows.append(
                        CheckResult(
                            f"{kind} {spec.name}",
                            Status.WARN if extra else Status.FAIL,
                            f"{item.name} {ref!r} from {source} cannot be imported: {exc}",
                            fix=(
                                f"install the package it needs ({missing}), or the extra of "
                                "its distribution that provides it"
                                if extra
                                else "fix the import path in the plugin's spec, or upgrade "
                                "or disable the distribution"
                            ),
                        )
                    )
    if checked and not rows:
        rows.append(CheckResult("plugin references", Status.OK, f"{checked} import paths resolve"))
    return rows


def check_home(ctx: DoctorContext) -> list[CheckResult]:
    home = ctx.home
    if not home.path.exists():
        return [
            CheckResult(
                "FERMIX_HOME",
                Status.WARN,
                f"{home.path} does not exist yet",
                fix="run `fermix setup`",
            )
        ]
    problems = home.permission_problems()
    if problems:
        return [CheckResult("FERMIX_HOME", Status.FAIL, "; ".join(problems))]
    return [CheckResult("FERMIX_HOME", Status.OK, f"{home.path} (private)")]


def check_auth_file(ctx: DoctorContext) -> list[CheckResult]:
    from fermix_core.authfile import AuthFileError, AuthStore

    store = AuthStore(ctx.home.auth_file)
    if not ctx.home.auth_file.exists():
        return [CheckResult("auth.json", Status.OK, "no OAuth logins stored")]
    try:
        profiles = sorted(store.read())
    except AuthFileError as exc:
        return [CheckResult("auth.json", Status.FAIL, str(exc))]
    return [
        CheckResult("auth.json", Status.OK, f"mode 0600; profiles: {', '.join(profiles) or 'none'}")
    ]


def check_keyring(ctx: DoctorContext) -> list[CheckResult]:
    from fermix_core.secrets import backend_name, keyring_writer_available
    from fermix_core.secrets.base import bounded_call, default_backend, keyring_problem

    fix = (
        "install and unlock a Secret Service (e.g. gnome-keyring), or store secrets as "
        '{ source = "env", env = "..." } / { source = "command", command = [...] }'
    )
    backend = None
    try:
        backend = default_backend()
        # A read probe, with the same deadline secret resolution uses: a locked or broken
        # keyring raises (or hangs behind an unlock prompt) here, not at get_keyring().
        bounded_call(lambda: backend.get_password("fermix", "fermix:__doctor_probe__"), 10.0)
    except Exception as exc:
        return [CheckResult("keyring", Status.WARN, keyring_problem(backend, exc), fix=fix)]
    name = backend_name(backend)
    if keyring_writer_available(backend):
        return [CheckResult("keyring", Status.OK, name)]
    return [CheckResult("keyring", Status.WARN, f"{name}: cannot store secrets", fix=fix)]


def check_secrets(ctx: DoctorContext) -> list[CheckResult]:
    if ctx.config is None:
        return [CheckResult("secrets", Status.SKIP, "config did not load")]
    from fermix_core.config import secret_fields
    from fermix_core.secrets import SecretResolver

    resolver = SecretResolver(
        environ=ctx.environ, profile=ctx.config.core.fermix_core.profile, host=ctx.host
    )
    rows = []
    configured = 0
    for field in secret_fields(ctx.config, ctx.registry):
        if field.value is None and field.env not in ctx.environ:
            continue
        configured += 1
        resolved = resolver.resolve(field)
        if resolved.value is None:
            rows.append(
                CheckResult(
                    f"secret {'.'.join(field.path)}",
                    Status.FAIL,
                    resolved.problem or "missing",
                    fix=f"set {field.env}, re-run `fermix setup`, or fix the stored reference",
                )
            )
    if not rows:
        rows.append(CheckResult("secrets", Status.OK, f"{configured} configured, all resolvable"))
    return rows


def _shipped_template_path(name: str) -> str:
    """Where this build's copy of template *name* lives, for a ``diff`` the user can run.

    A zipped install has no file to point at; the hint then names the package resource.
    """
    from importlib import resources
    from pathlib import Path

    resource = resources.files("fermix_core.prompt") / "templates" / name
    return str(resource) if isinstance(resource, Path) else f"fermix_core/prompt/templates/{name}"


def check_bootstrap(ctx: DoctorContext) -> list[CheckResult]:
    """Which shipped prompt templates moved on since this install's files were seeded.

    Seeded files are the operator's and are never rewritten, so an upgrade's template
    improvements reach an existing install only if someone diffs and merges them; this row
    is how they learn there is something to diff.
    """
    from fermix_core.prompt import SEED_RECORD, SeedRecordError, prompt_files, template_drift

    label = "bootstrap templates"
    home = ctx.home
    try:
        drifted = template_drift(home)
    except SeedRecordError as exc:
        return [
            CheckResult(
                label,
                Status.WARN,
                str(exc),
                fix=f"delete {home.path / SEED_RECORD}; drift cannot be tracked without it",
            )
        ]
    if drifted is None:
        present = [rel for rel in prompt_files() if (home.path / rel).exists()]
        if not present:
            return [
                CheckResult(
                    label,
                    Status.WARN,
                    "no seed record (setup never ran): there are no prompt files yet",
                    fix="run `fermix setup` to seed them",
                )
            ]
        return [
            CheckResult(
                label,
                Status.WARN,
                "no seed record (seeded before revision tracking, or setup never ran); "
                "drift from newer shipped templates cannot be checked",
                fix="optional: compare your files with the current templates by hand, e.g. "
                f"`diff {home.path / 'bootstrap/main/SOUL.md'} "
                f"{_shipped_template_path('SOUL.md')}`",
            )
        ]
    if not drifted:
        return [
            CheckResult(label, Status.OK, "the templates your prompt files came from are current")
        ]
    templates = prompt_files()
    lines = [f"shipped templates changed since seeding: {', '.join(drifted)}"]
    for rel in drifted:
        shipped = _shipped_template_path(templates[rel])
        if (home.path / rel).exists():
            lines.append(f"diff {home.path / rel} {shipped}")
        else:
            lines.append(f"{rel} is gone; `fermix setup` seeds the current template there")
    return [
        CheckResult(
            label,
            Status.WARN,
            "\n".join(lines),
            fix="review those differences and merge what you want to keep; Fermix never "
            "overwrites your prompt files",
        )
    ]


def check_sandbox(ctx: DoctorContext) -> list[CheckResult]:
    """Whether commands run confined (bubblewrap / sandbox-exec) or are only screened."""
    if ctx.config is None:
        return [CheckResult("sandbox confinement", Status.SKIP, "config not loaded")]
    from fermix_core.sandbox import SandboxPolicy, approval

    policy = SandboxPolicy.from_config(ctx.config, ctx.home.path, environ=ctx.environ)
    status = policy.confinement_status()
    rows: list[CheckResult] = []
    if status["active"]:
        net = "network on" if status["network"] else "no network"
        rows.append(CheckResult("sandbox confinement", Status.OK, f"{status['detail']} ({net})"))
    else:
        failing = status["setting"] == "required"
        rows.append(
            CheckResult(
                "sandbox confinement",
                Status.FAIL if failing else Status.WARN,
                status["detail"],
                fix=status["fix"],
            )
        )
    if ctx.home.config_file.exists():
        state = approval.check(ctx.home, record=False)
        if state.pending:
            rows.append(
                CheckResult(
                    "sandbox settings",
                    Status.WARN,
                    "[sandbox] was changed outside Fermix and is not applied: "
                    + "; ".join(state.changes()),
                    fix="`fermix sandbox approve` if you made the change; else undo it",
                )
            )
    return rows
