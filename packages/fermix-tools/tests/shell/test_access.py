from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.sandbox import ConfirmationStore
from fermix_core.testing import ToolContract
from fermix_core.tool import Trust, build_tool
from fermix_tools.shell.plugin import REQUEST_DIRECTORY_ACCESS

pytestmark = pytest.mark.anyio

KEY = ConversationKey("telegram", "42", None)


def chat_ctx(make_ctx, policy, store, **kw):
    ctx = make_ctx(policy, local=kw.pop("local", False), conversation_key=KEY, **kw)
    ctx.services = {**ctx.services, "confirmations": store}
    return ctx


class TestRequestDirectoryAccessContract(ToolContract):
    valid_args = {"path": "~/projects", "reason": "the task edits files there"}
    invalid_args = {"path": "~/projects", "reason": ""}
    invalid_field = "reason"

    @pytest.fixture(autouse=True)
    def _kit(self, sandbox_kit):
        self.build_policy, self.make_ctx = sandbox_kit

    def make_tool(self):
        return build_tool(REQUEST_DIRECTORY_ACCESS)

    def make_context(self, tmp_path: Path):
        policy = self.build_policy(tmp_path)
        (policy.os_home / "projects").mkdir(exist_ok=True)
        return chat_ctx(self.make_ctx, policy, ConfirmationStore())


@pytest.fixture
def tool():
    return build_tool(REQUEST_DIRECTORY_ACCESS)


@pytest.fixture
def store():
    return ConfirmationStore()


@pytest.fixture
def projects(os_home: Path) -> Path:
    path = os_home / "projects" / "app"
    path.mkdir(parents=True)
    return path


async def test_prompt_names_path_reason_diff_and_token(
    tool, policy, store, projects, sandbox_kit
) -> None:
    _, make_ctx = sandbox_kit
    config_before = (policy.fermix_home / "config.toml").read_text()
    ctx = chat_ctx(make_ctx, policy, store)
    out = await tool.invoke(
        {"path": str(projects / "src" / ".."), "reason": "fix the failing build"}, ctx
    )
    assert not out.is_error, out.text
    token = out.data["token"]
    assert f"  {projects}\n" in out.text, "the canonical path, not the one typed"
    assert "Why: fix the failing build" in out.text
    assert f'+ allowed_roots = ["{projects}"]' in out.text
    assert f"/confirm {token}" in out.text and "wait" in out.text
    assert token not in out.data["prompt_without_token"]
    # Nothing is applied until the owner confirms, and the token is single-use.
    assert (policy.fermix_home / "config.toml").read_text() == config_before
    assert projects not in policy.roots(ctx)
    pending = store.take(token, conversation_key=tuple(KEY), trust=Trust.OPERATOR)
    assert pending.payload == {"path": str(projects)}
    assert store.pending(tuple(KEY)) == []


@pytest.mark.parametrize(
    ("changes", "who"),
    [
        ({"trust": Trust.GUEST}, "guest"),
        ({"origin": "job"}, "job run"),
        ({"origin": "subagent"}, "subagent run"),
        ({"origin": "background"}, "background run"),
        ({"attended": False}, "unattended"),
    ],
)
async def test_refused_outside_attended_operator_turns(
    tool, policy, store, projects, sandbox_kit, changes, who
) -> None:
    _, make_ctx = sandbox_kit
    ctx = chat_ctx(make_ctx, policy, store)
    for name, value in changes.items():
        setattr(ctx, name, value)
    out = await tool.invoke({"path": str(projects), "reason": "needed"}, ctx)
    assert out.is_error and who in out.text
    assert store.pending(tuple(KEY)) == []


@pytest.mark.parametrize(
    "path",
    ["~", "~/.ssh", "~/.fermix", "/etc", "/", "~/.fermix/workspace/../..", "~/missing-dir"],
)
async def test_paths_no_grant_may_name_are_never_proposed(
    tool, policy, store, sandbox_kit, path
) -> None:
    _, make_ctx = sandbox_kit
    out = await tool.invoke({"path": path, "reason": "please"}, chat_ctx(make_ctx, policy, store))
    assert out.is_error
    assert "/confirm" not in out.text
    assert store.pending(tuple(KEY)) == []


async def test_already_inside_the_sandbox(tool, tmp_path, store, sandbox_kit) -> None:
    build_policy, make_ctx = sandbox_kit
    granted = tmp_path / "home" / "granted"
    (granted / "sub").mkdir(parents=True)
    policy = build_policy(tmp_path, allowed=(granted,))
    out = await tool.invoke(
        {"path": str(granted / "sub"), "reason": "x"}, chat_ctx(make_ctx, policy, store)
    )
    assert out.is_error and "already inside the sandbox" in out.text
    assert store.pending(tuple(KEY)) == []


async def test_without_a_confirmation_store(tool, policy, projects, sandbox_kit) -> None:
    _, make_ctx = sandbox_kit
    ctx = make_ctx(policy, conversation_key=KEY)
    out = await tool.invoke({"path": str(projects), "reason": "x"}, ctx)
    assert out.is_error and "not available" in out.text
