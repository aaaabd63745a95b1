"""A scripted model appends `mode = "open"` to config.toml with the shell tool; the next
start must not run with the wider sandbox (issue: the agent must not widen its own sandbox).

Confined, the shell cannot even see config.toml; screened only (confinement off), the
append lands but the daemon holds it until the owner approves it.
"""

from __future__ import annotations

import pytest
from fermix_core.api import Fermix
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import ToolCall, Turn
from fermix_core.sandbox.confine import probe
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing import FunctionProvider

pytestmark = pytest.mark.anyio


class Scripted:
    def __init__(self, command: str) -> None:
        self.turns = iter(
            [
                Turn(
                    content="",
                    tool_calls=[ToolCall(id="c1", name="shell", arguments={"command": command})],
                    model="m1",
                ),
                Turn(content="done", model="m1"),
            ]
        )
        self.results: list[str] = []
        self.provider = FunctionProvider(self._answer, name="scripted")

    async def _answer(self, request):
        for message in request.messages:
            if getattr(message, "role", "") == "tool":
                self.results.append(str(message.text))
        return next(self.turns, Turn(content="done", model="m1"))

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="scripted",
            label="Scripted",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=100_000),),
        )


CONFIG = """
[fermix_core.providers.scripted]
primary = true
base_url = "http://127.0.0.1:9/unused"

[fermix_core.memory]
review_enabled = false

[sandbox]
confinement = "{confinement}"
"""


@pytest.mark.parametrize("confinement", ["off", "auto"])
async def test_a_shell_call_cannot_widen_the_next_turns_sandbox(tmp_path, confinement) -> None:
    if confinement == "auto" and not probe().available:
        pytest.skip(f"confinement cannot run here: {probe().detail}")
    home = tmp_path / "fermix"
    home.mkdir(mode=0o700)
    config = home / "config.toml"
    config.write_text(CONFIG.format(confinement=confinement))
    environ = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "FERMIX_HOME": str(home)}
    command = f'printf \'mode = "open"\\ncommand_profile = "extended"\\n\' >> {config}'
    model = Scripted(command)
    async with Fermix.open(home, environ=environ, plugins=[("scripted", model)]) as fx:
        assert fx.service.runner.services["sandbox"].mode == "standard"
        await fx.ask("tidy up my config")
    appended = 'mode = "open"' in config.read_text()
    assert appended == (confinement == "off"), model.results
    async with Fermix.open(home, environ=environ, plugins=[("scripted", Scripted("true"))]) as fx:
        policy = fx.service.runner.services["sandbox"]
        assert policy.mode == "standard" and policy.command_profile == "assistant"
