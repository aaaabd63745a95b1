"""TrustPolicy: owner inference, guests, strangers, command allowlists, startup refusals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from fermix_core.gateway.trust import TrustPolicy, TrustPolicyError
from fermix_core.tool import Trust


def test_explicit_owner_is_operator_allowlisted_are_guests_others_dropped() -> None:
    policy = TrustPolicy("111", ["222", "333"], [], False)
    assert policy.authorize("111") is Trust.OPERATOR
    assert policy.authorize("222") is Trust.GUEST
    assert policy.authorize("333") is Trust.GUEST
    assert policy.authorize("444") is None


def test_single_allowlist_entry_is_the_owner() -> None:
    policy = TrustPolicy(allowed_ids=["555"])
    assert policy.effective_owner == "555"
    assert policy.authorize("555") is Trust.OPERATOR
    assert policy.authorize("556") is None


def test_several_allowlisted_without_owner_means_no_owner() -> None:
    policy = TrustPolicy(allowed_ids=["1", "2"], channel="discord")
    assert policy.effective_owner is None
    assert policy.authorize("1") is Trust.GUEST
    assert policy.authorize("2") is Trust.GUEST
    gap = policy.describe_owner_gap()
    assert gap is not None and "[fermix_channels.discord]" in gap and "/whoami" in gap


def test_allowlisting_never_promotes_next_to_an_explicit_owner() -> None:
    policy = TrustPolicy(owner_id="1", allowed_ids=["2"])
    assert policy.effective_owner == "1"
    assert policy.authorize("2") is Trust.GUEST


def test_command_allowlist_alone_does_not_authorize_ingress() -> None:
    policy = TrustPolicy(owner_id="1", command_allowlist=["9"])
    assert policy.authorize("9") is None
    assert policy.in_command_allowlist("9")


def test_local_surface_is_operator_for_everyone() -> None:
    policy = TrustPolicy.local_surface("cli")
    assert policy.authorize("anyone") is Trust.OPERATOR
    assert policy.authorize(None) is Trust.OPERATOR
    assert policy.startup_problem() is None
    assert policy.describe_owner_gap() is None


@pytest.mark.parametrize("sender", [None, "", "   ", True])
def test_missing_or_malformed_sender_ids_are_dropped(sender) -> None:
    policy = TrustPolicy(owner_id="1", allowed_ids=["", "2"])
    assert policy.authorize(sender) is None


def test_ids_are_normalized_from_ints_strings_and_lists() -> None:
    policy = TrustPolicy(owner_id=12, allowed_ids="3, 4  5,,", command_allowlist=(6, "7"))  # type: ignore[arg-type]
    assert policy.owner_id == "12"
    assert policy.allowed_ids == ("3", "4", "5")
    assert policy.command_allowlist == ("6", "7")
    assert policy.authorize(12) is Trust.OPERATOR
    assert policy.authorize(" 4 ") is Trust.GUEST


@pytest.mark.parametrize(
    "kwargs",
    [
        {"allowed_ids": 3.5},
        {"allowed_ids": [True]},
        {"allowed_ids": [{"id": 1}]},
        {"owner_id": ["1"]},
        {"owner_id": False},
    ],
)
def test_wrong_shapes_are_refused(kwargs) -> None:
    with pytest.raises(TrustPolicyError):
        TrustPolicy(**kwargs)


def test_command_gate_keeps_sandbox_mutations_with_the_operator() -> None:
    policy = TrustPolicy(owner_id="1", allowed_ids=["2", "3"], command_allowlist=["2"])
    gate = policy.may_run_command
    assert gate("1", Trust.OPERATOR, operator_only=True, sandbox_mutation=True)
    assert gate("2", Trust.GUEST, operator_only=True, sandbox_mutation=False)
    assert not gate("2", Trust.GUEST, operator_only=True, sandbox_mutation=True)
    assert not gate("3", Trust.GUEST, operator_only=True, sandbox_mutation=False)
    assert gate("3", Trust.GUEST, operator_only=False, sandbox_mutation=False)


def test_startup_problem_for_a_remote_channel_with_nobody_authorized() -> None:
    problem = TrustPolicy(channel="telegram").startup_problem()
    assert problem is not None
    assert "[fermix_channels.telegram]" in problem
    assert "owner_user_id" in problem and "fermix setup --reconfigure" in problem
    # A command allowlist alone still authorizes nobody.
    assert TrustPolicy(command_allowlist=["1"], channel="x").startup_problem() is not None
    assert TrustPolicy(owner_id="1").startup_problem() is None
    assert TrustPolicy(allowed_ids=["1", "2"]).startup_problem() is None


# ---------------------------------------------------------------------- from_section


def test_from_mapping_with_either_allowlist_key() -> None:
    users = TrustPolicy.from_section(
        {"owner_user_id": 7, "allowed_user_ids": [8], "command_allowlist": ["8"]},
        channel="telegram",
    )
    assert users == TrustPolicy("7", ("8",), ("8",), channel="telegram")
    senders = TrustPolicy.from_section({"allowed_sender_ids": "+15550001"})
    assert senders.effective_owner == "+15550001"
    assert TrustPolicy.from_section({}).authorize("x") is None


def test_from_none_section_serves_nobody_and_local_serves_everyone() -> None:
    assert TrustPolicy.from_section(None, channel="slack").authorize("u") is None
    assert TrustPolicy.from_section(None, channel="slack").startup_problem() is not None
    local = TrustPolicy.from_section(None, local=True, channel="cli")
    assert local.local and local.authorize("u") is Trust.OPERATOR


@dataclass
class ChannelModelLike:
    """The duck-typed shape of a remote channel config model (effective_owner & co)."""

    channel: ClassVar[str] = "signal"
    owner_user_id: str | None = None
    allowed_sender_ids: list[str] = field(default_factory=list)
    command_allowlist: list[str] = field(default_factory=list)

    def allowed_ids(self) -> list[str]:
        return list(self.allowed_sender_ids)

    def effective_owner(self) -> str | None:
        if self.owner_user_id:
            return self.owner_user_id
        return self.allowed_sender_ids[0] if len(self.allowed_sender_ids) == 1 else None


def test_from_a_config_model_through_its_methods() -> None:
    policy = TrustPolicy.from_section(ChannelModelLike(allowed_sender_ids=["+1"]))
    assert policy.channel == "signal"
    assert policy.authorize("+1") is Trust.OPERATOR

    several = TrustPolicy.from_section(
        ChannelModelLike(allowed_sender_ids=["+1", "+2"], command_allowlist=["+2"])
    )
    assert several.effective_owner is None
    assert several.authorize("+2") is Trust.GUEST
    assert several.in_command_allowlist("+2")


def test_from_a_plain_object_with_attributes() -> None:
    class Section:
        owner_user_id = "o"
        allowed_user_ids = ("a", "b")
        command_allowlist = ()

    policy = TrustPolicy.from_section(Section(), channel="slack")
    assert policy.authorize("o") is Trust.OPERATOR
    assert policy.authorize("b") is Trust.GUEST
    assert policy.channel == "slack"


def test_policies_are_immutable() -> None:
    policy = TrustPolicy(owner_id="1")
    with pytest.raises(AttributeError):
        policy.owner_id = "2"  # type: ignore[misc]
