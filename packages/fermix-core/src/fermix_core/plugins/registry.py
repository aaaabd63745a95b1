"""The validated collection of every spec the loaded plugins registered."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fermix_core.plugins.discovery import FIRST_PARTY, distribution_of
from fermix_core.specs import (
    ChannelSpec,
    CommandSpec,
    ConfigSectionSpec,
    Spec,
    ToolSpec,
)

S = TypeVar("S", bound=Spec)


@dataclass(frozen=True)
class SpecError:
    """A registration problem: an invalid spec, a hook that raised, or a name collision."""

    kind: str
    name: str | None
    message: str
    sources: tuple[str, ...]

    def __str__(self) -> str:
        where = ", ".join(self.sources)
        subject = f"{self.kind} {self.name!r}" if self.name else self.kind
        return f"{subject}: {self.message} (from {where})"


@dataclass
class SpecRegistry:
    """Specs by kind and name, with the plugin each came from and every problem found."""

    specs: dict[str, dict[str, Spec]] = field(default_factory=lambda: defaultdict(dict))
    sources: dict[tuple[str, str], str] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)

    # ------------------------------------------------------------------ building

    @classmethod
    def build(cls, collected: list[tuple[Spec, str]], errors: list[SpecError]) -> SpecRegistry:
        """Validate *collected* ``(spec, source)`` pairs and index them.

        Two specs of one kind with one name (command aliases and derived config sections
        count as names) are one error listing every source, and none of them is kept: an
        ambiguous name must be resolved by the operator, not by load order. The exception
        is a name one first-party distribution already claims: it is reserved, so the
        first-party spec is kept and each other claimant is refused with its own error.
        """
        registry = cls(errors=list(errors))
        named: dict[tuple[str, str], list[tuple[Spec, str]]] = defaultdict(list)
        for spec, source in collected:
            problems = spec.problems()
            if problems:
                registry.errors.append(
                    SpecError(
                        spec.kind, getattr(spec, "name", None), "; ".join(problems), (source,)
                    )
                )
                continue
            for key in _names(spec):
                named[key].append((spec, source))

        dropped: set[int] = set()
        for key, entries in named.items():
            if len({id(s) for s, _ in entries}) <= 1:
                continue
            first = [(s, src) for s, src in entries if _first_party(src)]
            if len({id(s) for s, _ in first}) == 1:
                # First-party names are reserved: the built-in stays, every other claimant
                # is refused on its own, named with its distribution.
                owner = first[0][1]
                for spec, source in entries:
                    if _first_party(source):
                        continue
                    dist = distribution_of(source)
                    where = f"distribution {dist}" if dist else "the in-process plugin"
                    registry.errors.append(
                        SpecError(
                            key[0],
                            key[1],
                            f"refused: the name is reserved by first-party {owner}; rename "
                            f"it in {where}",
                            (source,),
                        )
                    )
                    dropped.add(id(spec))
                continue
            sources = tuple(dict.fromkeys(src for _, src in entries))
            registry.errors.append(SpecError(key[0], key[1], "registered more than once", sources))
            dropped.update(id(spec) for spec, _ in entries)

        for spec, source in collected:
            key = (spec.kind, spec.name)
            if id(spec) in dropped or key in registry.sources or spec.problems():
                continue
            registry.specs[spec.kind][spec.name] = spec
            registry.sources[key] = source
        return registry

    # ------------------------------------------------------------------ reading

    def of(self, kind: str) -> dict[str, Spec]:
        return dict(self.specs.get(kind, {}))

    def get(self, kind: str, name: str) -> Spec | None:
        return self.specs.get(kind, {}).get(name)

    def source_of(self, spec: Spec) -> str | None:
        return self.sources.get((spec.kind, spec.name))

    def typed(self, cls: type[S]) -> dict[str, S]:
        return {n: s for n, s in self.specs.get(cls.kind, {}).items() if isinstance(s, cls)}

    def __iter__(self) -> Iterator[Spec]:
        for by_name in self.specs.values():
            yield from by_name.values()

    def config_sections(self) -> dict[str, tuple[Any, str]]:
        """Every plugin-owned config section path -> (model ref, owning source)."""
        sections: dict[str, tuple[Any, str]] = {}
        for spec in self.typed(ChannelSpec).values():
            if spec.config_model is not None:
                sections[f"fermix_channels.{spec.name}"] = (
                    spec.config_model,
                    self.source_of(spec) or "",
                )
        for spec in self.typed(ToolSpec).values():
            if spec.config_section and spec.config_model is not None:
                sections[f"fermix_core.tools.{spec.config_section}"] = (
                    spec.config_model,
                    self.source_of(spec) or "",
                )
        for spec in self.typed(ConfigSectionSpec).values():
            sections[spec.name] = (spec.model, self.source_of(spec) or "")
        return sections


def _first_party(source: str) -> bool:
    return distribution_of(source) in FIRST_PARTY


def _names(spec: Spec) -> list[tuple[str, str]]:
    """The names a spec occupies; sections are one namespace across spec kinds."""
    keys = [(spec.kind, spec.name)]
    if isinstance(spec, CommandSpec):
        keys += [(spec.kind, alias) for alias in spec.aliases]
    if isinstance(spec, ChannelSpec) and spec.config_model is not None:
        keys.append(("config_section", f"fermix_channels.{spec.name}"))
    if isinstance(spec, ToolSpec) and spec.config_section:
        keys.append(("config_section", f"fermix_core.tools.{spec.config_section}"))
    if isinstance(spec, ConfigSectionSpec):
        keys = [("config_section", spec.name)]
    return keys
