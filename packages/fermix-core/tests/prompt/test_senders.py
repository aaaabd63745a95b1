"""Whether a chat is shared: the one-pass check agrees with the definition."""

from __future__ import annotations

from types import SimpleNamespace

from fermix_core.messages import Message
from fermix_core.prompt.senders import is_shared, replay
from fermix_core.tool import Trust
from hypothesis import given
from hypothesis import strategies as st

_senders = st.sampled_from([None, "", "owner-1", "guest-2", "guest-3"])
_rows = st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _senders), max_size=8)


def rows(spec: list[tuple[str, str | None]]) -> list[SimpleNamespace]:
    made = []
    for n, (role, sender) in enumerate(spec):
        message = Message.user(f"u{n}") if role == "user" else Message.assistant(f"a{n}")
        made.append(
            SimpleNamespace(
                message=message, sender_id=sender, speaker="owner", sender_name=None, kind="message"
            )
        )
    return made


@given(spec=_rows, sender=_senders, is_group=st.booleans())
def test_replay_labels_exactly_the_shared_chats(spec, sender, is_group) -> None:
    window = rows(spec)
    user = Message.user("now")
    view = replay(
        window,
        user,
        speaker="owner",
        sender_id=sender,
        sender_name=None,
        is_group=is_group,
        trust=Trust.OPERATOR,
    )
    senders = [row.sender_id for row in window if row.message.role == "user"]
    shared = is_shared(is_group, [*senders, sender])
    assert (view.note is not None) == shared
    if not shared:
        assert view.history == [row.message for row in window] and view.user is user
