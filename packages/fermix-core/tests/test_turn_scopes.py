"""The turn runner's shielded commit scope, made through the running loop's anyio backend."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import anyio.lowlevel
from fermix_core.turns import TurnRunner


def runner_state() -> SimpleNamespace:
    return SimpleNamespace(_scopes=None)


def test_the_commit_scope_is_shielded_from_an_outer_cancel_on_every_loop() -> None:
    state = runner_state()
    finished: list[int] = []

    async def turn(n: int) -> None:
        with anyio.CancelScope() as outer:
            outer.cancel()  # a /stop arriving while the reply is being committed
            with TurnRunner._shielded(state):  # type: ignore[arg-type]
                await anyio.lowlevel.checkpoint()  # raises here unless shielded
                finished.append(n)
            await anyio.lowlevel.checkpoint()  # outside the shield: cancelled
            finished.append(-n)  # never reached
        assert outer.cancelled_caught

    anyio.run(turn, 1)
    first = state._scopes
    anyio.run(turn, 2)  # a new event loop: the factory is looked up again
    assert finished == [1, 2]
    assert first is not None and state._scopes is not None and state._scopes[0] is not first[0]


def test_the_backend_is_looked_up_once_per_loop() -> None:
    state = runner_state()

    async def two_turns() -> None:
        with TurnRunner._shielded(state):  # type: ignore[arg-type]
            pass
        looked_up = state._scopes
        scope = TurnRunner._shielded(state)  # type: ignore[arg-type]
        assert state._scopes is looked_up and scope.shield

    anyio.run(two_turns)
