"""docs/plugins.md must describe exactly the hooks and spec records the code declares.

Plugin authors read the reference page, not ``hookspecs.py``; a page that silently drifts
from the code is worse than no page. The checkers below compare the two and every problem
they report says which file to change and what to write, so fixing drift is mechanical.

The checkers are plain functions over (markdown text, module) so the hostile tests at the
bottom can feed them deliberately broken pages and modules and prove each kind of drift is
caught.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import textwrap
import types
from pathlib import Path
from typing import Any

import pluggy
import pytest
from fermix_core import hookspecs, specs

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "plugins.md"
DOC_NAME = "docs/plugins.md"
SPECS_SECTION = "Spec records"

HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
FENCE_RE = re.compile(r"^(```|~~~)")


# --------------------------------------------------------------------------- markdown parsing


@dataclasses.dataclass
class Section:
    level: int
    title: str
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def sections(markdown: str) -> list[Section]:
    """Split *markdown* at every heading; a section runs until the next heading of any level.

    Headings inside fenced code blocks are ignored (a ``# comment`` in a shell example is
    not a heading).
    """
    result: list[Section] = []
    current: Section | None = None
    fenced = False
    for line in markdown.splitlines():
        if FENCE_RE.match(line.strip()):
            fenced = not fenced
        match = None if fenced else HEADING_RE.match(line)
        if match:
            current = Section(len(match.group(1)), match.group(2).strip("` "), [])
            result.append(current)
        elif current is not None:
            current.lines.append(line)
    return result


def code_blocks(text: str, language: str = "python") -> list[str]:
    blocks: list[str] = []
    inside: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if inside is None and stripped == f"```{language}":
            inside = []
        elif inside is not None and stripped == "```":
            blocks.append("\n".join(inside))
            inside = None
        elif inside is not None:
            inside.append(line)
    return blocks


def subsections_of(markdown: str, parent_title: str) -> dict[str, Section]:
    """Level-3 sections under the level-2 section titled *parent_title*."""
    found: dict[str, Section] = {}
    inside = False
    for section in sections(markdown):
        if section.level <= 2:
            inside = section.title == parent_title
        elif inside and section.level == 3:
            found[section.title] = section
    return found


# --------------------------------------------------------------------------- hooks


def declared_hooks(module: types.ModuleType, project: str = "fermix") -> dict[str, Any]:
    """Every function in *module* carrying pluggy's hookspec marker for *project*."""
    marker = f"{project}_spec"
    return {
        name: obj
        for name, obj in vars(module).items()
        if inspect.isfunction(obj) and isinstance(getattr(obj, marker, None), dict)
    }


def _annotation(value: Any) -> str:
    # hookspecs uses ``from __future__ import annotations``: annotations are already the
    # source strings. Anything else (a module without the future import) is rendered the
    # way it would be spelled in source.
    if isinstance(value, str):
        return value
    return inspect.formatannotation(value)


def expected_signature(name: str, func: Any) -> str:
    signature = inspect.signature(func)
    params = []
    for param in signature.parameters.values():
        text = param.name
        if param.annotation is not inspect.Parameter.empty:
            text += f": {_annotation(param.annotation)}"
        params.append(text)
    text = f"{name}({', '.join(params)})"
    if signature.return_annotation is not inspect.Signature.empty:
        text += f" -> {_annotation(signature.return_annotation)}"
    return text


def docstring_example(func: Any) -> str | None:
    """The dedented block after ``Example::`` in *func*'s docstring, or ``None``."""
    doc = inspect.getdoc(func) or ""
    lines = doc.splitlines()
    for index, line in enumerate(lines):
        if line.strip() == "Example::":
            body = []
            for following in lines[index + 1 :]:
                if following.strip() and not following.startswith((" ", "\t")):
                    break
                body.append(following)
            example = textwrap.dedent("\n".join(body)).strip("\n")
            return example or None
    return None


def _normalise(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip("\n").splitlines())


def hook_problems(
    markdown: str, module: types.ModuleType, *, source: str = "hookspecs.py"
) -> list[str]:
    """Everything that makes the hook reference in *markdown* disagree with *module*."""
    problems: list[str] = []
    hooks = declared_hooks(module)
    documented = {
        s.title: s
        for s in sections(markdown)
        if s.level == 3 and re.fullmatch(r"fermix_\w+", s.title)
    }

    for name, func in sorted(hooks.items()):
        signature = expected_signature(name, func)
        example = docstring_example(func)
        firstresult = bool(getattr(func, "fermix_spec", {}).get("firstresult"))
        if example is None:
            problems.append(
                f"{source}: the docstring of {name} has no 'Example::' block; add one showing "
                "a complete @hookimpl implementation (docs/plugins.md mirrors it)"
            )
        section = documented.get(name)
        if section is None:
            problems.append(
                f"{DOC_NAME}: hook {name} is not documented; add a '### {name}' section with the "
                f"signature line `{signature}`, **Called:**, **Arguments:**, **Returns:** and the "
                "docstring's example as a ```python block"
            )
            continue
        signature_lines = [
            line.strip().strip("`")
            for line in section.lines
            if line.strip().startswith(f"`{name}(") and line.strip().endswith("`")
        ]
        if not signature_lines:
            problems.append(
                f"{DOC_NAME}: section '### {name}' has no signature line; "
                f"add the line `{signature}`"
            )
        elif signature_lines[0] != signature:
            problems.append(
                f"{DOC_NAME}: the signature of {name} reads `{signature_lines[0]}` but {source} "
                f"declares `{signature}`; replace the code line under '### {name}'"
            )
        for label in ("**Called:**", "**Arguments:**", "**Returns:**"):
            if label not in section.text:
                problems.append(
                    f"{DOC_NAME}: section '### {name}' lacks a {label} paragraph; say it "
                    "(mirror the docstring)"
                )
        mentions_firstresult = "firstresult" in section.text
        if firstresult and not mentions_firstresult:
            problems.append(
                f"{DOC_NAME}: {name} is a firstresult hook; say so in '### {name}' (the word "
                "'firstresult' and that the first non-None result wins)"
            )
        elif not firstresult and mentions_firstresult:
            problems.append(
                f"{DOC_NAME}: '### {name}' calls the hook firstresult but {source} does not "
                "declare firstresult=True; remove the claim or change the hookspec"
            )
        if example is not None:
            blocks = [_normalise(b) for b in code_blocks(section.text)]
            if not any(_normalise(example) in block for block in blocks):
                problems.append(
                    f"{DOC_NAME}: the example under '### {name}' does not contain the docstring's "
                    f"example; put this in its ```python block (imports may precede it):\n"
                    f"{textwrap.indent(example, '    ')}"
                )

    for name in sorted(set(documented) - set(hooks)):
        problems.append(
            f"{DOC_NAME}: '### {name}' documents a hook that {source} does not declare; remove the "
            "section or declare the hook"
        )
    return problems


# --------------------------------------------------------------------------- spec records


def render_default(f: dataclasses.Field[Any]) -> str:
    """How a field's default is written in the docs' Default column (inside backticks)."""
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        return "required"
    value = f.default_factory() if f.default is dataclasses.MISSING else f.default
    if isinstance(value, enum.Enum):
        return f"`{type(value).__name__}.{value.name}`"
    if isinstance(value, frozenset):
        # Set order depends on string hashing; the docs list members sorted.
        return "`frozenset({" + ", ".join(repr(v) for v in sorted(value)) + "})`"
    return f"`{value!r}`"


def table_rows(section: Section) -> dict[str, list[str]]:
    """First-column code name -> the row's cells, from the section's markdown tables."""
    rows: dict[str, list[str]] = {}
    for line in section.lines:
        stripped = line.strip()
        if not stripped.startswith("|") or set(stripped) <= {"|", "-", " ", ":"}:
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", stripped)[1:-1]]
        if cells and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = cells
    return rows


def record_classes(module: types.ModuleType) -> dict[str, type]:
    return {
        name: obj
        for name, obj in vars(module).items()
        if isinstance(obj, type)
        and obj.__module__ == module.__name__
        and dataclasses.is_dataclass(obj)
    }


def enum_classes(module: types.ModuleType) -> dict[str, type[enum.Enum]]:
    return {
        name: obj
        for name, obj in vars(module).items()
        if isinstance(obj, type)
        and obj.__module__ == module.__name__
        and issubclass(obj, enum.Enum)
    }


def spec_problems(
    markdown: str, module: types.ModuleType, *, source: str = "specs.py"
) -> list[str]:
    """Everything that makes the spec-record reference in *markdown* disagree with *module*."""
    problems: list[str] = []
    documented = subsections_of(markdown, SPECS_SECTION)
    if not documented:
        return [
            f"{DOC_NAME}: there is no '## {SPECS_SECTION}' section with '### <Record>' subsections"
        ]

    for cls_name, cls in sorted(record_classes(module).items()):
        section = documented.get(cls_name)
        fields = dataclasses.fields(cls)
        if section is None:
            problems.append(
                f"{DOC_NAME}: record {cls_name} is not documented; add '### {cls_name}' under "
                f"'## {SPECS_SECTION}' with a | Field | Type | Default | Meaning | table"
            )
            continue
        kind = vars(cls).get("kind")
        if isinstance(kind, str) and kind != "spec" and f"Kind `{kind}`" not in section.text:
            problems.append(
                f"{DOC_NAME}: '### {cls_name}' must say 'Kind `{kind}`' (the registry it lands in)"
            )
        rows = table_rows(section)
        for f in fields:
            row = rows.get(f.name)
            wanted_type = f"`{_annotation(f.type)}`"
            wanted_default = render_default(f)
            escaped_type = wanted_type.replace("|", "\\|")
            line = f"| `{f.name}` | {escaped_type} | {wanted_default} | ... |"
            if row is None:
                problems.append(
                    f"{DOC_NAME}: field {cls_name}.{f.name} is not listed; add the row {line}"
                )
                continue
            if len(row) < 4:
                problems.append(
                    f"{DOC_NAME}: the row for {cls_name}.{f.name} needs four cells: {line}"
                )
                continue
            if row[1] != wanted_type:
                problems.append(
                    f"{DOC_NAME}: {cls_name}.{f.name} is typed {row[1]} in the docs but "
                    f"{wanted_type} in {source}; fix the row to {line}"
                )
            if row[2] != wanted_default:
                problems.append(
                    f"{DOC_NAME}: {cls_name}.{f.name} defaults to {row[2]} in the docs but "
                    f"{wanted_default} in {source}; fix the row to {line}"
                )
            if not row[3]:
                problems.append(
                    f"{DOC_NAME}: {cls_name}.{f.name} has an empty Meaning cell; say why it exists"
                )
        for extra in sorted(set(rows) - {f.name for f in fields}):
            problems.append(
                f"{DOC_NAME}: '### {cls_name}' lists field {extra!r} that {source} does not have; "
                "remove the row"
            )

    for enum_name, enum_cls in sorted(enum_classes(module).items()):
        section = documented.get(enum_name)
        if section is None:
            problems.append(
                f"{DOC_NAME}: enum {enum_name} is not documented; add '### {enum_name}' under "
                f"'## {SPECS_SECTION}' with a | Member | Value | Meaning | table"
            )
            continue
        rows = table_rows(section)
        for member in enum_cls:
            row = rows.get(member.name)
            if row is None or len(row) < 2 or row[1] != f"`{member.value}`":
                problems.append(
                    f"{DOC_NAME}: {enum_name}.{member.name} is missing or wrong; add the row "
                    f"| `{member.name}` | `{member.value}` | ... |"
                )
        for extra in sorted(set(rows) - {m.name for m in enum_cls}):
            problems.append(
                f"{DOC_NAME}: '### {enum_name}' lists member {extra!r} that does not exist"
            )
    return problems


# --------------------------------------------------------------------------- the real page


@pytest.fixture(scope="module")
def doc_text() -> str:
    assert DOC.is_file(), f"{DOC} is missing; it is the plugin reference and must exist"
    return DOC.read_text(encoding="utf-8")


def _report(problems: list[str]) -> str:
    return "docs/plugins.md has drifted from the code:\n- " + "\n- ".join(problems)


def test_every_hook_is_documented_exactly(doc_text: str) -> None:
    problems = hook_problems(doc_text, hookspecs)
    assert not problems, _report(problems)


def test_every_spec_record_field_is_documented(doc_text: str) -> None:
    problems = spec_problems(doc_text, specs)
    assert not problems, _report(problems)


def test_the_checker_sees_every_hook_and_record() -> None:
    # Guards the checkers themselves: if discovery silently found nothing, the two tests
    # above would pass on any page.
    hooks = declared_hooks(hookspecs)
    assert set(hookspecs.REGISTRATION_HOOKS) <= set(hooks)
    assert {"fermix_cli", "fermix_resolve_secret", "fermix_event"} <= set(hooks)
    assert {cls.__name__ for cls in specs.SPEC_KINDS.values()} <= set(record_classes(specs))


def test_loading_and_listing_facts_are_on_the_page(doc_text: str) -> None:
    from fermix_core.plugins.discovery import ENTRY_POINT_GROUP, LOAD_PLUGINS_ENV

    assert f"[project.entry-points.{ENTRY_POINT_GROUP}]" in doc_text
    assert LOAD_PLUGINS_ENV in doc_text
    assert "[fermix_core.plugins]" in doc_text
    assert "fermix plugins list --json" in doc_text
    for status in ("loaded", "failed", "blocked", "disabled", "conflict"):
        assert f"| `{status}` |" in doc_text, f"status {status!r} needs a row in the status table"


# --------------------------------------------------------------------------- hostile cases


def _drop_section(markdown: str, title: str) -> str:
    out, skipping = [], False
    for line in markdown.splitlines():
        match = HEADING_RE.match(line)
        if match:
            skipping = match.group(2).strip("` ") == title
        if not skipping:
            out.append(line)
    return "\n".join(out)


def test_missing_hook_section_is_reported(doc_text: str) -> None:
    problems = hook_problems(_drop_section(doc_text, "fermix_event"), hookspecs)
    assert any("hook fermix_event is not documented" in p for p in problems)
    assert any("`fermix_event(event: TelemetryEvent) -> None`" in p for p in problems)


def test_documented_hook_that_does_not_exist_is_reported(doc_text: str) -> None:
    extra = doc_text + "\n### fermix_teleport\n\n`fermix_teleport() -> None`\n"
    problems = hook_problems(extra, hookspecs)
    assert any("'### fermix_teleport' documents a hook" in p for p in problems)


def test_changed_signature_is_reported(doc_text: str) -> None:
    drifted = doc_text.replace(
        "`fermix_cli(app: Any) -> None`", "`fermix_cli(app: typer.Typer) -> None`"
    )
    assert drifted != doc_text
    problems = hook_problems(drifted, hookspecs)
    assert any(
        "reads `fermix_cli(app: typer.Typer) -> None`" in p
        and "declares `fermix_cli(app: Any) -> None`" in p
        for p in problems
    )


def test_signature_of_a_changed_hookspec_is_reported(doc_text: str) -> None:
    # The code moving while the page stays put is the common drift.
    module = types.ModuleType("fake_hookspecs")
    marker = pluggy.HookspecMarker("fermix")

    def fermix_cli(app, verbose: bool) -> None:  # pragma: no cover - never called
        """Example::

        @hookimpl
        def fermix_cli(app):
            weather = typer.Typer(help="Weather plugin commands.")
        """

    module.fermix_cli = marker(fermix_cli)
    problems = hook_problems(doc_text, module, source="fake_hookspecs.py")
    assert any("declares `fermix_cli(app, verbose: bool) -> None`" in p for p in problems)


def test_missing_firstresult_mention_is_reported(doc_text: str) -> None:
    drifted = doc_text.replace("**firstresult**", "first-wins")
    problems = hook_problems(drifted, hookspecs)
    assert any("fermix_resolve_secret is a firstresult hook" in p for p in problems)


def test_false_firstresult_claim_is_reported(doc_text: str) -> None:
    drifted = doc_text.replace(
        "Observe a telemetry event", "A firstresult hook that observes a telemetry event"
    )
    assert drifted != doc_text
    problems = hook_problems(drifted, hookspecs)
    assert any("'### fermix_event' calls the hook firstresult" in p for p in problems)


def test_hookspec_without_example_is_reported() -> None:
    module = types.ModuleType("fake_hookspecs")
    marker = pluggy.HookspecMarker("fermix")

    def fermix_ping() -> None:  # pragma: no cover - never called
        """Answer pings. Called never."""

    module.fermix_ping = marker(fermix_ping)
    markdown = (
        "## Hooks\n\n### fermix_ping\n\n`fermix_ping() -> None`\n\n"
        "**Called:** x\n**Arguments:** x\n**Returns:** x\n"
    )
    problems = hook_problems(markdown, module, source="fake_hookspecs.py")
    assert problems == [
        "fake_hookspecs.py: the docstring of fermix_ping has no 'Example::' block; add one showing "
        "a complete @hookimpl implementation (docs/plugins.md mirrors it)"
    ]


def test_example_that_no_longer_matches_the_docstring_is_reported(doc_text: str) -> None:
    drifted = doc_text.replace('name="searx"', 'name="searxng"')
    assert drifted != doc_text
    problems = hook_problems(drifted, hookspecs)
    assert any("example under '### fermix_web_search_backends'" in p for p in problems)


def test_heading_inside_a_code_block_is_not_a_section() -> None:
    markdown = "## Hooks\n\n```console\n### fermix_fake\n```\n"
    assert [s.title for s in sections(markdown)] == ["Hooks"]


def test_missing_spec_field_is_reported(doc_text: str) -> None:
    drifted = "\n".join(
        line for line in doc_text.splitlines() if not line.startswith("| `supports_mask` |")
    )
    problems = spec_problems(drifted, specs)
    assert any(
        "field ImageBackendSpec.supports_mask is not listed; "
        "add the row | `supports_mask` | `bool` | `False` |" in p
        for p in problems
    )


def test_wrong_spec_type_and_default_are_reported(doc_text: str) -> None:
    drifted = doc_text.replace("| `order` | `int` | `1000` |", "| `order` | `float` | `100` |")
    assert drifted != doc_text
    problems = spec_problems(drifted, specs)
    assert any("ProviderSpec.order is typed `float`" in p for p in problems)
    assert any("ProviderSpec.order defaults to `100`" in p for p in problems)


def test_field_that_no_longer_exists_is_reported(doc_text: str) -> None:
    drifted = doc_text.replace(
        "| `keyless` | `bool` | `False` | needs no key |",
        "| `keyless` | `bool` | `False` | needs no key |\n| `region` | `str` | `''` | gone |",
    )
    assert drifted != doc_text
    problems = spec_problems(drifted, specs)
    assert any("'### WebSearchBackendSpec' lists field 'region'" in p for p in problems)


def test_new_record_class_is_reported(doc_text: str) -> None:
    module = types.ModuleType("fake_specs")

    @dataclasses.dataclass(frozen=True)
    class VoiceBackendSpec:
        name: str
        factory: str | None = None

    VoiceBackendSpec.__module__ = module.__name__
    module.VoiceBackendSpec = VoiceBackendSpec
    problems = spec_problems(doc_text, module, source="fake_specs.py")
    assert problems == [
        "docs/plugins.md: record VoiceBackendSpec is not documented; add '### VoiceBackendSpec' "
        "under '## Spec records' with a | Field | Type | Default | Meaning | table"
    ]


def test_enum_member_drift_is_reported(doc_text: str) -> None:
    drifted = doc_text.replace("| `EXEC` | `exec` |", "| `EXEC` | `execute` |")
    assert drifted != doc_text
    problems = spec_problems(drifted, specs)
    assert any("PolicyClass.EXEC is missing or wrong" in p for p in problems)


def test_frozenset_default_is_rendered_in_a_stable_order() -> None:
    field = next(f for f in dataclasses.fields(specs.ProviderSpec) if f.name == "config_keys")
    assert render_default(field) == (
        "`frozenset({'api_key', 'base_url', 'default_model', 'primary', 'vision_models'})`"
    )
