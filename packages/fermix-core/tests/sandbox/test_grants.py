"""Confirmation tokens, config edits on a real config.toml, and grant proposals."""

from __future__ import annotations

import pytest
import tomlkit
from fermix_core.channel import ConversationKey
from fermix_core.config import ConfigError
from fermix_core.plugins import PluginHost
from fermix_core.sandbox import ConfirmationError, ConfirmationStore, GrantError, propose_grant
from fermix_core.sandbox.grants import (
    TOKEN_ALPHABET,
    apply_change,
    canonical_grant,
    evolve_policy,
    is_risky,
    normalize_token,
    plan_change,
)
from fermix_core.tool import Trust

KEY = ConversationKey("tg", "chat", None)
OTHER = ConversationKey("tg", "other-chat", None)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock) -> ConfirmationStore:
    return ConfirmationStore(clock=clock)


def issue(store, key=KEY, kind="grant"):
    return store.issue(kind, {"path": "/x"}, conversation_key=key, summary="s", diff="d")


# --------------------------------------------------------------------------- the store


def test_a_token_is_single_use(store) -> None:
    pending = issue(store)
    assert len(pending.token) == 8 and set(pending.token) <= set(TOKEN_ALPHABET)
    assert store.take(pending.token, conversation_key=KEY, trust=Trust.OPERATOR) == pending
    with pytest.raises(ConfirmationError) as again:
        store.take(pending.token, conversation_key=KEY, trust=Trust.OPERATOR)
    assert again.value.reason == "unknown"


def test_tokens_expire_after_sixty_seconds(store, clock) -> None:
    first = issue(store)
    second = issue(store)
    clock.now += 59.9
    store.take(first.token, conversation_key=KEY, trust=Trust.OPERATOR)
    clock.now += 0.1
    with pytest.raises(ConfirmationError) as expired:
        store.take(second.token, conversation_key=KEY, trust=Trust.OPERATOR)
    assert expired.value.reason == "expired"
    assert len(store) == 0


def test_another_conversation_or_a_guest_cannot_use_or_burn_a_token(store) -> None:
    pending = issue(store)
    with pytest.raises(ConfirmationError) as elsewhere:
        store.take(pending.token, conversation_key=OTHER, trust=Trust.OPERATOR)
    assert elsewhere.value.reason == "wrong_conversation"
    with pytest.raises(ConfirmationError) as guest:
        store.take(pending.token, conversation_key=KEY, trust=Trust.GUEST)
    assert guest.value.reason == "not_owner"
    assert store.take(pending.token, conversation_key=KEY, trust=Trust.OPERATOR) == pending


def test_tokens_are_forgiving_about_case_spaces_and_dashes(store) -> None:
    pending = issue(store)
    typed = f" {pending.token[:4].lower()}-{pending.token[4:]} "
    assert normalize_token(typed) == pending.token
    assert store.take(typed, conversation_key=KEY, trust=Trust.OPERATOR) == pending


@pytest.mark.parametrize("token", ["", "   ", "nope", "A" * 1000, "\x00"])
def test_garbage_tokens_are_unknown(store, token) -> None:
    issue(store)
    with pytest.raises(ConfirmationError) as caught:
        store.take(token, conversation_key=KEY, trust=Trust.OPERATOR)
    assert caught.value.reason == "unknown"


def test_a_conversation_holds_a_bounded_number_of_pending_changes(clock) -> None:
    store = ConfirmationStore(clock=clock, max_pending=3)
    tokens = []
    for _ in range(10):
        tokens.append(issue(store).token)
        clock.now += 1
    assert [p.token for p in store.pending(KEY)] == tokens[-3:]
    issue(store, key=OTHER)
    assert len(store.pending(KEY)) == 3 and len(store.pending(OTHER)) == 1


@pytest.mark.anyio
async def test_listeners_run_and_a_failing_one_does_not_stop_the_rest(store) -> None:
    seen = []

    def broken(pending):
        raise RuntimeError("boom")

    async def good(pending):
        seen.append(pending.token)

    store.listeners += [broken, good]
    pending = issue(store)
    await store.notify_applied(pending)
    assert seen == [pending.token]


def test_discard(store) -> None:
    pending = issue(store)
    assert store.discard(pending.token) and not store.discard(pending.token)


# --------------------------------------------------------------------------- config edits


@pytest.fixture
def registry():
    return PluginHost().collect()


def test_apply_grant_and_revoke_keep_comments(layout, registry) -> None:
    layout.fermix.config_file.write_text('# my settings\n[sandbox]\n# keep me\nmode = "strict"\n')
    policy = layout.policy("strict")
    edit = apply_change(layout.fermix, registry, policy, "grant", {"path": str(layout.outside)})
    text = layout.fermix.config_file.read_text()
    assert "# my settings" in text and "# keep me" in text
    assert tomlkit.parse(text)["sandbox"]["allowed_roots"] == [str(layout.outside)]
    assert edit.diff() == f'[sandbox]\n+ allowed_roots = ["{layout.outside}"]'
    with pytest.raises(GrantError, match="already granted"):
        apply_change(layout.fermix, registry, policy, "grant", {"path": str(layout.outside)})
    apply_change(layout.fermix, registry, policy, "revoke", {"path": str(layout.outside)})
    text = layout.fermix.config_file.read_text()
    assert "allowed_roots" not in text and "# keep me" in text
    with pytest.raises(GrantError, match="not a granted folder"):
        apply_change(layout.fermix, registry, policy, "revoke", {"path": str(layout.outside)})


def test_revoke_matches_a_hand_written_entry_by_its_canonical_path(layout, registry) -> None:
    layout.fermix.config_file.write_text('[sandbox]\nallowed_roots = ["~/code/app/", "/srv"]\n')
    policy = layout.policy("strict")
    apply_change(layout.fermix, registry, policy, "revoke", {"path": str(layout.project)})
    assert tomlkit.parse(layout.fermix.config_file.read_text())["sandbox"]["allowed_roots"] == [
        "/srv"
    ]


def test_env_edits_move_a_name_between_allow_and_deny(layout, registry) -> None:
    policy = layout.policy("strict")
    apply_change(layout.fermix, registry, policy, "env_allow", {"name": "NODE_ENV"})
    apply_change(layout.fermix, registry, policy, "env_deny", {"name": "NODE_ENV"})
    env = tomlkit.parse(layout.fermix.config_file.read_text())["sandbox"]["env"]
    assert env["deny"] == ["NODE_ENV"] and "allow" not in env
    apply_change(layout.fermix, registry, policy, "env_set", {"name": "PAGER", "value": "cat"})
    apply_change(layout.fermix, registry, policy, "preset", {"profile": "bare"})
    data = tomlkit.parse(layout.fermix.config_file.read_text())["sandbox"]
    assert data["env"]["set"]["PAGER"] == "cat" and data["command_profile"] == "bare"


@pytest.mark.parametrize(
    ("kind", "payload", "message"),
    [
        ("env_allow", {"name": "1BAD"}, "not a variable name"),
        ("env_set", {"name": "BAD-NAME", "value": "x"}, "not a variable name"),
        ("preset", {"profile": "root"}, "unknown preset"),
        ("preset", {"profile": "assistant"}, "already assistant"),
        ("chmod", {}, "unknown sandbox change"),
    ],
)
def test_bad_changes_are_refused_before_writing(layout, kind, payload, message) -> None:
    with pytest.raises(GrantError, match=message):
        plan_change(layout.policy(), kind, payload, {})


def test_a_change_that_would_break_the_config_is_refused_and_nothing_is_written(
    layout, registry
) -> None:
    layout.fermix.config_file.write_text('# mine\n[sandbox]\nmode = "strict"\n')
    before = layout.fermix.config_file.read_text()
    with pytest.raises(ConfigError, match="absolute path"):
        apply_change(layout.fermix, registry, layout.policy(), "grant", {"path": "relative/x"})
    assert layout.fermix.config_file.read_text() == before


def test_risk_levels() -> None:
    assert is_risky("grant", {}) and is_risky("env_allow", {}) and is_risky("env_set", {})
    assert is_risky("preset", {"profile": "extended"})
    assert not is_risky("preset", {"profile": "bare"})
    assert not is_risky("revoke", {}) and not is_risky("env_deny", {})


def test_evolve_policy_applies_each_kind(layout) -> None:
    policy = layout.policy("strict")
    granted = evolve_policy(policy, "grant", {"path": str(layout.outside)})
    assert granted.allowed_roots == (layout.outside,)
    assert evolve_policy(granted, "revoke", {"path": str(layout.outside)}).allowed_roots == ()
    assert evolve_policy(policy, "env_allow", {"name": "A"}).env_allow == ("A",)
    assert evolve_policy(policy, "preset", {"profile": "bare"}).command_profile == "bare"


# --------------------------------------------------------------------------- canonical grants


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("/", "whole file system"),
        ("~", "whole home directory"),
        ("~/.ssh", "protected"),
        ("~/.fermix", "Fermix's own state"),
        ("~/.fermix/workspace", "Fermix's own state"),
        ("/etc", "operating-system"),
        ("/usr/local", "operating-system"),
        ("~/missing", "does not exist"),
        ("~/.bashrc", "is a file"),
        ("relative/dir", "relative"),
        ("", "give the folder"),
    ],
)
def test_canonical_grant_refuses(layout, target, message) -> None:
    with pytest.raises(GrantError, match=message):
        canonical_grant(layout.policy(), target, None)


def test_canonical_grant_refuses_an_ancestor_of_home(layout) -> None:
    with pytest.raises(GrantError, match="contains your whole home"):
        canonical_grant(layout.policy(), str(layout.home.parent), None)


def test_canonical_grant_resolves_relative_paths_and_symlinks(layout) -> None:
    link = layout.home / "app-link"
    link.symlink_to(layout.project)
    policy = layout.policy()
    assert canonical_grant(policy, "app", layout.project.parent) == layout.project
    assert canonical_grant(policy, "~/app-link/", None) == layout.project
    assert canonical_grant(policy, f'"{layout.project}"', None) == layout.project


# --------------------------------------------------------------------------- proposals


def test_propose_grant_holds_the_canonical_path_reason_and_diff(layout, make_ctx, store) -> None:
    policy = layout.policy("strict")
    ctx = make_ctx(services={"confirmations": store}, local=False)
    proposal = propose_grant(policy, str(layout.project) + "/../app/", "run the tests", ctx)
    assert proposal.canonical_path == layout.project
    assert proposal.reason == "run the tests"
    assert proposal.diff == f'[sandbox]\n+ allowed_roots = ["{layout.project}"]'
    prompt = proposal.prompt()
    assert str(layout.project) in prompt and f"/confirm {proposal.token}" in prompt
    assert proposal.token not in proposal.prompt(include_token=False)
    pending = store.take(proposal.token, conversation_key=KEY, trust=Trust.OPERATOR)
    assert pending.kind == "grant" and pending.payload == {"path": str(layout.project)}
    assert pending.reason == "run the tests"


@pytest.mark.parametrize(
    "ctx_kw",
    [
        {"trust": Trust.GUEST},
        {"attended": False},
        {"origin": "job"},
        {"origin": "subagent"},
        {"origin": "background"},
        {"key": None},
    ],
)
def test_propose_grant_only_in_attended_operator_conversations(
    layout, make_ctx, store, ctx_kw
) -> None:
    ctx = make_ctx(services={"confirmations": store}, **ctx_kw)
    with pytest.raises(GrantError):
        propose_grant(layout.policy("strict"), str(layout.project), "why", ctx)
    assert len(store) == 0


@pytest.mark.parametrize("target", ["/", "~", "~/.ssh", "~/.fermix", "/etc", "/var/log"])
def test_propose_grant_refuses_to_even_ask_for_forbidden_folders(
    layout, make_ctx, store, target
) -> None:
    ctx = make_ctx(services={"confirmations": store})
    with pytest.raises(GrantError, match="cannot be granted"):
        propose_grant(layout.policy("strict"), target, "need it", ctx)
    assert len(store) == 0


def test_propose_grant_needs_a_reason_a_store_and_a_folder_outside(layout, make_ctx, store) -> None:
    policy = layout.policy("strict", allowed_roots=(layout.outside,))
    with_store = make_ctx(services={"confirmations": store})
    with pytest.raises(GrantError, match="say why"):
        propose_grant(policy, str(layout.project), "  ", with_store)
    with pytest.raises(GrantError, match="not available"):
        propose_grant(policy, str(layout.project), "x", make_ctx())
    with pytest.raises(GrantError, match="already inside"):
        propose_grant(policy, str(layout.outside), "x", with_store)


def test_propose_grant_is_traced(layout, make_ctx, store, tracer) -> None:
    policy = layout.policy("strict", tracer=tracer)
    propose_grant(policy, str(layout.project), "why", make_ctx(services={"confirmations": store}))
    assert tracer.records[-1][1]["decision"] == "proposed"
