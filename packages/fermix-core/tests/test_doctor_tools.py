"""The doctor warns when no tool plugin is loaded: an agent without tools can only talk."""

from __future__ import annotations

from pathlib import Path

from fermix_core import hookimpl
from fermix_core.boot import assemble
from fermix_core.doctor import CheckResult, DoctorContext, Status, run_checks
from fermix_core.home import FermixHome
from fermix_core.specs import ToolSpec


def tool_rows(home: FermixHome, plugins: list[tuple[str, object]]) -> list[CheckResult]:
    assembly = assemble(
        home,
        environ={"FERMIX_HOME": str(home.path)},
        entry_points=False,
        plugins=plugins,
    )
    return [r for r in run_checks(DoctorContext(assembly)) if r.label == "tools"]


class OneTool:
    @hookimpl
    def fermix_tools(self):
        yield ToolSpec(name="echo_back", description="Echo the text.", factory="echo_mod:Tool")


def test_no_tool_plugin_is_a_warning_that_says_how_to_fix_it(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    rows = tool_rows(home, [])
    assert len(rows) == 1
    assert rows[0].status is Status.WARN
    assert "no tool plugin is loaded" in rows[0].detail
    assert 'pip install "fermix-agent"' in (rows[0].fix or "")


def test_a_loaded_tool_silences_the_row(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    assert tool_rows(home, [("tools.echo", OneTool())]) == []


class NoProviderRow:
    @hookimpl
    def fermix_doctor_checks(self):
        from fermix_core.specs import DoctorCheckSpec

        yield DoctorCheckSpec(name="echo_row", label="echo row", check=echo_row)


def echo_row(ctx: DoctorContext) -> list[CheckResult]:
    return [
        CheckResult(
            "providers",
            Status.FAIL,
            "no provider configured — run `fermix setup`",
            fix="run `fermix setup` to configure a provider",
        ),
        CheckResult("other", Status.WARN, "stale — run `fermix restart`", fix="edit the file"),
    ]


def test_a_row_does_not_say_its_fix_twice(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    assembly = assemble(
        home,
        environ={"FERMIX_HOME": str(home.path)},
        entry_points=False,
        plugins=[("tests.echo", NoProviderRow())],
    )
    rows = {r.label: r for r in run_checks(DoctorContext(assembly)) if r.check == "echo_row"}
    assert rows["providers"].detail == "no provider configured"
    # A different fix keeps the detail's own advice.
    assert rows["other"].detail == "stale — run `fermix restart`"


class BrokenRefs:
    """Well-formed import paths that do not exist, and one needing a package not installed."""

    @hookimpl
    def fermix_tools(self):
        yield ToolSpec(
            name="typo_tool",
            description="Points at a class that is not there.",
            factory="fermix_core.tool:NoSuchTool",
            args_model="fermix_core.tool:ToolOutput",
        )
        yield ToolSpec(
            name="needs_extra",
            description="Its module imports a package that is not installed.",
            factory="fermix_doctor_probe_missing_pkg.tools:Tool",
        )


def test_doctor_resolves_every_spec_reference(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    assembly = assemble(
        home,
        environ={"FERMIX_HOME": str(home.path)},
        entry_points=False,
        plugins=[("tools.broken", BrokenRefs())],
    )
    rows = {r.label: r for r in run_checks(DoctorContext(assembly))}
    typo = rows["tool typo_tool"]
    assert typo.status is Status.FAIL
    assert "factory 'fermix_core.tool:NoSuchTool'" in typo.detail
    assert "tools.broken (in-process)" in typo.detail and "fix the import path" in (typo.fix or "")
    missing = rows["tool needs_extra"]
    assert missing.status is Status.FAIL  # the spec's own module is what is missing
    assert "No module named 'fermix_doctor_probe_missing_pkg'" in missing.detail
    assert "plugin references" not in rows  # the OK summary only when everything resolves


def test_a_missing_third_party_package_is_a_warning_naming_it(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "probe_tool_mod.py").write_text("import fermix_probe_not_installed_dep\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    class NeedsDep:
        @hookimpl
        def fermix_tools(self):
            yield ToolSpec(name="needs_dep", description="x", factory="probe_tool_mod:Tool")

    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    assembly = assemble(
        home,
        environ={"FERMIX_HOME": str(home.path)},
        entry_points=False,
        plugins=[("tools.dep", NeedsDep())],
    )
    [row] = [r for r in run_checks(DoctorContext(assembly)) if r.label == "tool needs_dep"]
    assert row.status is Status.WARN
    assert "install the package it needs (fermix_probe_not_installed_dep)" in (row.fix or "")


def test_every_first_party_reference_resolves(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    assembly = assemble(home, environ={"FERMIX_HOME": str(home.path)})
    rows = run_checks(DoctorContext(assembly))
    bad = [
        r
        for r in rows
        if r.label.split(" ")[0] in {"tool", "provider"} and r.status is not Status.OK
    ]
    assert bad == []
    [summary] = [r for r in rows if r.label == "plugin references"]
    assert summary.status is Status.OK and "import paths resolve" in summary.detail
