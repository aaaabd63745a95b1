"""``fermix doctor``: a registry of checks contributed through ``fermix_doctor_checks``.

Core's own rows (config, plugins, FERMIX_HOME, keyring, secrets) are registered by
:mod:`fermix_core.builtin_plugin` exactly the way a plugin registers its rows, so later
features add a row by adding a spec, never by editing this module.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from fermix_core.specs import DoctorCheckSpec, resolve_ref

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.boot import Assembly
    from fermix_core.config import ConfigError, LoadedConfig

log = logging.getLogger("fermix.doctor")


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass
class CheckResult:
    """One doctor row. ``fix`` tells the user what to run or change next."""

    label: str
    status: Status
    detail: str = ""
    fix: str | None = None
    check: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        return data


@dataclass
class DoctorContext:
    assembly: Assembly
    config: LoadedConfig | None = None
    config_error: ConfigError | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def home(self) -> Any:
        return self.assembly.home

    @property
    def registry(self) -> Any:
        return self.assembly.registry

    @property
    def host(self) -> Any:
        return self.assembly.host

    @property
    def environ(self) -> Any:
        return self.assembly.environ


def _as_results(value: Any, spec: DoctorCheckSpec) -> list[CheckResult]:
    items: Iterable[Any] = [value] if isinstance(value, CheckResult) else (value or [])
    results = []
    for item in items:
        if not isinstance(item, CheckResult):
            results.append(
                CheckResult(
                    spec.label or spec.name, Status.FAIL, f"check returned {type(item).__name__}"
                )
            )
            continue
        item.check = item.check or spec.name
        item.detail = _without_repeated_fix(item.detail, item.fix)
        results.append(item)
    return results


_RUN_CLAUSE = re.compile(r"\s*(?:—|-|;|,)\s*run (`[^`]+`)\s*$")


def _without_repeated_fix(detail: str, fix: str | None) -> str:
    """Drop a trailing "— run `cmd`" from *detail* when the row's fix already says it.

    Messages written for other places (a turn's reply, a config error) end with what to
    run; in a doctor row that is the fix's job, and saying it twice reads as noise.
    """
    match = _RUN_CLAUSE.search(detail)
    if fix and match and match.group(1) in fix:
        return detail[: match.start()]
    return detail


def run_checks(context: DoctorContext) -> list[CheckResult]:
    """Run every registered check in order; a crashing check becomes a failed row."""
    specs = sorted(
        context.registry.typed(DoctorCheckSpec).values(), key=lambda s: (s.order, s.name)
    )
    results: list[CheckResult] = []
    for spec in specs:
        try:
            results.extend(_as_results(resolve_ref(spec.check)(context), spec))
        except Exception as exc:
            log.exception("doctor check %s crashed", spec.name)
            results.append(
                CheckResult(
                    spec.label or spec.name,
                    Status.FAIL,
                    f"the check itself failed: {type(exc).__name__}: {exc}",
                    check=spec.name,
                )
            )
    return results


def summary(results: list[CheckResult]) -> dict[str, int]:
    counts = {str(s): 0 for s in Status}
    for result in results:
        counts[str(result.status)] += 1
    return counts
