"""The pytest plugin as a plugin author meets it: auto-loaded, cheap, and self-cleaning."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import keyring
import pytest
from fermix_core.plugins.host import PluginHost


def test_fermix_home_fixture(fermix_home, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from fermix_core.home import FermixHome
    from fermix_core.keyring_backend import MemoryKeyring

    assert isinstance(fermix_home, FermixHome)
    assert os.environ["FERMIX_HOME"] == str(fermix_home.path)
    assert fermix_home.path.is_dir()
    assert stat.S_IMODE(fermix_home.path.stat().st_mode) == 0o700
    backend = keyring.get_keyring()
    assert isinstance(backend, MemoryKeyring)
    keyring.set_password("fermix:OPENAI_API_KEY", "fermix", "sk-test")
    assert keyring.get_password("fermix:OPENAI_API_KEY", "fermix") == "sk-test"
    assert os.environ["PYTHON_KEYRING_BACKEND"] == "fermix_core.keyring_backend.MemoryKeyring"


def test_plugin_host_fixture_starts_empty(plugin_host: PluginHost) -> None:
    from fermix_core import hookimpl
    from fermix_core.specs import ToolSpec

    assert plugin_host.records == []

    class Plugin:
        @hookimpl
        def fermix_tools(self):  # type: ignore[no-untyped-def]
            yield ToolSpec(name="t", description="d", factory="x.y:Z")

    record = plugin_host.register(Plugin(), "tests.plugin")
    assert record.status == "loaded"
    assert plugin_host.collect().get("tool", "t") is not None


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {"FERMIX_HOME", "PYTHON_KEYRING_BACKEND", "FERMIX_LOAD_PLUGINS", "PYTEST_ADDOPTS"}
        and not k.startswith("PYTEST_")
    }
    env.update(extra)
    return env


def test_importing_the_plugin_stays_cheap() -> None:
    heavy = [
        "pydantic",
        "keyring",
        "httpx",
        "fermix_core.plugins",
        "fermix_core.testing.providers",
        "fermix_core.testing.contracts",
        "fermix_core.testing.fakedist",
    ]
    code = (
        "import sys, fermix_core.testing.pytest_plugin\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_clean_env()
    )
    assert out.stdout.strip() == "", f"the pytest plugin imported {out.stdout.strip()} at load time"


def run_pytest(tmp_path: Path, source: str, **env: str) -> dict[str, str]:
    """Run *source* as a test module in a fresh project; return test name -> outcome."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_author.py").write_text(textwrap.dedent(source))
    report = tmp_path / "report.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_clean_env(**env),
        check=False,
    )
    assert report.exists(), proc.stdout + proc.stderr
    outcomes: dict[str, str] = {}
    root = ET.parse(report).getroot()  # noqa: S314 - a report this test just wrote
    for case in root.iter("testcase"):
        test_name = (case.get("name") or "").split("[", 1)[0]  # drop the anyio backend id
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{test_name}"
        kinds = {child.tag for child in case}
        outcome = (
            "failed"
            if kinds & {"failure", "error"}
            else "skipped"
            if "skipped" in kinds
            else "passed"
        )
        outcomes[name] = outcome
    return outcomes


def test_fixtures_reach_a_fresh_project_and_undo_themselves(tmp_path: Path) -> None:
    outcomes = run_pytest(
        tmp_path,
        """
        import os
        import keyring
        from keyring.backends import null

        def test_a_uses_the_home(fermix_home):
            assert os.environ["FERMIX_LOAD_PLUGINS"] == "left-alone"
            keyring.set_password("svc", "user", "secret")

        def test_b_sees_everything_restored():
            assert "FERMIX_HOME" not in os.environ
            assert isinstance(keyring.get_keyring(), null.Keyring)
            assert keyring.get_password("svc", "user") is None

        def test_c_other_fixtures(plugin_host, fake_distribution, scripted_provider):
            assert plugin_host.records == []
            assert scripted_provider("x").remaining == 1
        """,
        FERMIX_LOAD_PLUGINS="left-alone",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    assert outcomes == {
        "test_author::test_a_uses_the_home": "passed",
        "test_author::test_b_sees_everything_restored": "passed",
        "test_author::test_c_other_fixtures": "passed",
    }


def test_contracts_catch_broken_implementations(tmp_path: Path) -> None:
    """Each contract fails the implementation that breaks the rule it checks."""
    outcomes = run_pytest(
        tmp_path,
        """
        from fermix_core.memory import InMemoryBackend
        from fermix_core.messages import Turn
        from fermix_core.provider import ErrorKind, Provider, ProviderError
        from fermix_core.testing import MemoryChannel
        from fermix_core.testing.contracts import (
            ChannelContract, MemoryBackendContract, ProviderContract, Scenario,
        )

        SECRET = "sk-live-abcdef123456"

        class Sloppy(Provider):
            name = "Sloppy Provider"           # not a registry name

            def __init__(self, scenario):
                self.scenario = scenario

            async def chat(self, request):
                if self.scenario is Scenario.ERROR:
                    raise RuntimeError(f"500 from server with key {SECRET}")   # unclassified
                if self.scenario is Scenario.TOOL_CALL:
                    return Turn(content="I would call a tool", model="m")       # no tool call
                request.messages.append(request.messages[-1])                  # mutates
                return Turn(content="", model="")                               # empty, no model

            def vision(self, model=None):
                return True

        class TestSloppy(ProviderContract):
            secret = SECRET
            def make_provider(self, scenario):
                return Sloppy(scenario)

        class Leaky(Provider):
            name = "leaky"
            async def chat(self, request):
                raise ProviderError(ErrorKind.AUTH, f"key {SECRET} refused", provider="leaky")

        class TestLeaky(ProviderContract):
            secret = SECRET
            def make_provider(self, scenario):
                return Leaky()

        class Deleting(InMemoryBackend):
            async def forget(self, id):
                fact = self._facts.pop(id, None)
                return fact is not None

        class TestDeleting(MemoryBackendContract):
            def make_backend(self, tmp_path):
                return Deleting()

        class Lying(MemoryChannel):
            supports_edit = True
            async def edit(self, chat_id, message_id, text):
                raise NotImplementedError

        class TestLying(ChannelContract):
            def make_channel(self):
                return Lying("lying")
            async def trigger_inbound(self, channel, text):
                await channel.inject(text)
            async def sent_texts(self, channel, chat_id):
                return [m.text for m in channel.sent if m.chat_id == chat_id]
        """,
    )
    failed = {name for name, outcome in outcomes.items() if outcome == "failed"}
    assert {n for n in failed if n.startswith("TestSloppy::")} == {
        "TestSloppy::test_name_is_a_registry_name",
        "TestSloppy::test_plain_message_gets_a_text_turn",
        "TestSloppy::test_request_is_left_untouched",
        "TestSloppy::test_tool_call_round_trip",
        "TestSloppy::test_failure_is_a_classified_provider_error",
        "TestSloppy::test_images_reach_the_model_or_fail_loud",
        "TestSloppy::test_a_background_call_is_answered_like_a_turn",
    }
    # Leaky fails every call, so only the leak check itself is of interest here.
    assert outcomes["TestLeaky::test_failure_is_a_classified_provider_error"] == "failed"
    assert {n for n in failed if n.startswith(("TestDeleting::", "TestLying::"))} == {
        "TestDeleting::test_forget_archives_and_restore_returns",
        "TestLying::test_optional_abilities_match_their_flags",
    }
    assert outcomes["TestDeleting::test_store_then_get"] == "passed"
    assert outcomes["TestLying::test_send_returns_an_id_and_reaches_the_platform"] == "passed"
