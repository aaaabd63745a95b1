"""What reaches the CLI after (or besides) a turn's own answer, in one process.

``fermix ask`` and ``fermix chat`` talk to :meth:`FermixService.ask`. Three things used to
go nowhere there: a ``/background`` result (it arrived after the ask had returned), the
``/ultra`` answer (the command returned its acknowledgement first) and the sandbox's
directory-access prompt (only the model saw it). These tests run the real runtime with an
in-process provider and read only what the CLI surface itself gets.
"""

from __future__ import annotations

import anyio
import pytest
from fermix_core.api import Fermix
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import Turn
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing import FunctionProvider

pytestmark = pytest.mark.anyio


class Model:
    """Answers ``echo: <last user text>``; a prompt in :attr:`gates` waits for its event."""

    def __init__(self) -> None:
        self.gates: dict[str, anyio.Event] = {}
        self.seen: list[str] = []
        self.provider = FunctionProvider(self._answer, name="local_model")

    async def _answer(self, request):
        text = request.messages[-1].text
        self.seen.append(text)
        gate = self.gates.get(text)
        if gate is not None:
            await gate.wait()
        return Turn(content=f"echo: {text}", model="m1")

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="local_model",
            label="Local model",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=100_000),),
        )


CONFIG = {
    "fermix_core": {
        "providers": {"local_model": {"primary": True, "base_url": "http://127.0.0.1:9/unused"}},
        "memory": {"review_enabled": False},
    }
}


@pytest.fixture
async def fx(fermix_home):
    model = Model()
    async with Fermix.open(
        fermix_home, config=CONFIG, plugins=[("providers.local_model", model)]
    ) as fx:
        fx.model = model
        yield fx


async def window_texts(fx, key) -> list[str]:
    store = fx.service.store
    rows = await store.load_window(await store.conversation_id(key))
    return [row.message.text for row in rows]


async def test_a_background_result_is_posted_to_the_cli_conversation_and_committed(fx) -> None:
    gate = fx.model.gates["summarise the logs"] = anyio.Event()
    started = await fx.ask("/background summarise the logs", session="work")
    assert "bg1" in started.text and started.status == "command"
    gate.set()
    with anyio.fail_after(20):  # a safety net, not a timing assertion
        posted = await fx.service.inbox.take("work", wait=None)
    assert posted == ["echo: summarise the logs"]
    assert await window_texts(fx, started.conversation_key) == [
        "summarise the logs",
        "echo: summarise the logs",
    ]
    # Delivered once: nothing is left for the next reader.
    assert await fx.service.inbox.take("work", wait=0) == []


async def test_background_results_stay_with_their_own_session(fx) -> None:
    await fx.ask("/bg for a", session="a")
    with anyio.fail_after(20):
        assert await fx.service.inbox.take("a", wait=None) == ["echo: for a"]
    assert await fx.service.inbox.take("b", wait=0) == []


async def test_an_ultra_answer_is_returned_with_the_command(fx) -> None:
    """``fermix ask "/ultra …"`` and ``chat`` print the answer, not only "Working on that"."""
    outcome = await fx.ask("/ultra plan the whole trip", session="u")
    assert "ultra mode" in outcome.text  # the acknowledgement comes first …
    assert outcome.text.endswith("echo: plan the whole trip")  # … then the answer
    assert outcome.status == "ok"
    assert outcome.session_id.startswith("main-")
    assert await window_texts(fx, outcome.conversation_key) == [
        "plan the whole trip",
        "echo: plan the whole trip",
    ]


async def test_the_cli_owner_sees_the_directory_access_prompt_and_confirms_inline(
    fx, tmp_path
) -> None:
    import re

    from fermix_core.messages import ToolCall

    wanted = tmp_path / "outside-project"
    wanted.mkdir()

    async def answer(request):
        last = request.messages[-1]
        if last.tool_result is not None:
            # The model says only that it waits: the prompt must not depend on it relaying.
            return Turn(content="Waiting for your approval.", model="m1")
        return Turn(
            content="",
            tool_calls=[
                ToolCall(
                    id="g1",
                    name="request_directory_access",
                    arguments={"path": str(wanted), "reason": "the files you asked about"},
                )
            ],
            model="m1",
        )

    fx.model.provider.fn = answer
    asked = await fx.ask("read my project", session="cli-owner", cwd=tmp_path / "elsewhere")
    assert str(wanted) in asked.text and "the files you asked about" in asked.text
    token = re.search(r"^Approve with /confirm (\S+) ", asked.text, re.M).group(1)
    assert asked.text.rstrip().endswith("Waiting for your approval.")
    # `fermix chat` sends the next line through the same path: /confirm inline.
    confirmed = await fx.ask(f"/confirm {token}", session="cli-owner")
    assert "done" in confirmed.text.lower() or "applied" in confirmed.text.lower()
    assert str(wanted) in fx.runtime.home.config_file.read_text()
