"""The registered specs of the files and shell plugins: classes, flags and who sees them."""

from __future__ import annotations

import pytest
from fermix_core.agent.capabilities import visible_to
from fermix_core.plugins.host import PluginHost
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import Trust
from fermix_tools.files import plugin as files_plugin
from fermix_tools.shell import plugin as shell_plugin

EXPECTED = {
    "file_read": (PolicyClass.OWNER_DATA_READ, True, False),
    "glob_search": (PolicyClass.OWNER_DATA_READ, True, False),
    "content_search": (PolicyClass.OWNER_DATA_READ, True, False),
    "git_read": (PolicyClass.OWNER_DATA_READ, True, False),
    "file_write": (PolicyClass.WRITE, False, False),
    "file_edit": (PolicyClass.WRITE, False, False),
    "git_write": (PolicyClass.WRITE, False, False),
    "shell": (PolicyClass.EXEC, False, True),
    "request_directory_access": (PolicyClass.WRITE, False, True),
}


@pytest.fixture(scope="module")
def registered() -> dict[str, ToolSpec]:
    host = PluginHost()
    host.register(files_plugin, "tools.files")
    host.register(shell_plugin, "tools.shell")
    registry = host.collect()
    assert registry.errors == []
    return dict(registry.typed(ToolSpec))


def test_every_tool_registers_with_its_declared_class(registered) -> None:
    assert set(registered) == set(EXPECTED)
    for name, (policy, read_only, owner_only) in EXPECTED.items():
        spec = registered[name]
        assert spec.problems() == []
        assert (spec.policy, spec.read_only, spec.owner_only) == (policy, read_only, owner_only)
        assert spec.guidance and spec.failure_modes


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_workspace_tool_reaches_a_guest(registered, name) -> None:
    spec = registered[name]
    assert not visible_to(spec, Trust.GUEST, third_party=False, reactions=None)
    assert visible_to(spec, Trust.OPERATOR, third_party=False, reactions=None)
