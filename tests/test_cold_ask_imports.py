"""What a cold, daemon-less ``fermix ask`` loads: a config, one provider call, one store
append — not the job scheduler, MCP, the channel runtime, setup or doctor machinery, the
daemon client, the tool implementations, the first-party plugins' registration modules,
PyYAML, nor a TLS context for an ``http://`` model.

Deterministic stand-in for the cold-ask budget (``bench/bench_cold_ask.py`` measures the
time): it runs the real console entry point twice in fresh interpreters against a loopback
model and checks the second run's ``sys.modules`` (the first one fills the caches in
``$FERMIX_HOME/cache``, as the first use on any machine does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fermix_core import leancode
from fermix_core.testing.loopback import (
    RecordedRequest,
    Reply,
    ThreadedLoopback,
    chat_completion,
)

ANSWER = "Hello from the loopback model."

PROBE = """
import builtins, gc, json, sys
import fermix_core.codecache as codecache
compiled = []  # dataclass sources the generated-code cache had to compile
codecache.compile = lambda *a, **k: compiled.append(a[0]) or builtins.compile(*a, **k)
import fermix_core.leancode as leancode
_install = leancode.LeanFinder.install
def install(self):  # keep a reference to the finder the ask installs
    global _lean_finder
    _lean_finder = self
    return _install(self)
leancode.LeanFinder.install = install
from fermix_core.cli.entry import main
sys.argv = ["fermix", "ask", "hi", "--session", sys.argv[1]]
code = main()  # as the console script runs it
frozen = gc.get_freeze_count()
gc.unfreeze()  # get_objects() does not list the permanent generation
objects = gc.get_objects()
lazy = [c for c in objects if type(c).__name__ == "LazyTrustContext"]
trust = [c for c in objects if type(c).__name__ == "DeferredTrustContext"]
lean = [m for m in list(sys.modules.values())
        if type(getattr(m, "__loader__", None)).__name__ == "LeanLoader"]
print(json.dumps({"code": code, "modules": sorted(n for n, m in sys.modules.items() if m),
                  "lean_modules": len(lean),
                  "lean_cached": sum(1 for m in lean if "/cache/bytecode/" in m.__cached__),
                  "lean_docs": [m.__name__ for m in lean
                                if m.__name__.startswith("fermix") and m.__doc__ is not None],
                  "function_doc": sys.modules["fermix_core.channel"].Channel.send.__doc__,
                  "class_doc": bool(sys.modules["fermix_core.channel"].InboundMessage.__doc__),
                  "lazy_built": [c.built for c in lazy],
                  "trust_loaded": [c.trust_loaded for c in trust], "frozen": frozen,
                  "compiled": len(compiled), "located": _lean_finder.located}))
"""

#: Prefixes a one-off ask must not import (each is its own feature, loaded on use).
NOT_NEEDED = (
    "fermix_core.jobs",  # scheduled jobs live in the daemon
    "fermix_core.mcp",  # only with [mcp.servers]
    "fermix_core.channels.runtime",  # remote channels are the daemon's
    "fermix_core.sandbox.command_tools",  # only with [sandbox] expose_commands
    "fermix_core.sandbox.policy",  # the sandbox policy is built by the first tool needing it
    "fermix_core.sandbox.confine",
    "fermix_core.sandbox.commands",
    "fermix_core.sandbox.approval",
    "fermix_core.sandbox.grants",  # the /confirm store is made by the first grant proposal
    "fermix_core.agent.delegation",  # the delegator is built by the first sub-agent call
    "fermix_core.memory.review",  # the reviewer is made when a review is due (the first
    "fermix_core.memory.profiles",  # run's failed: the second one's gate is closed)
    "fermix_core.memory.scope",
    "fermix_core.daemon",  # no socket, no client
    "fermix_core.setup",  # setup steps: only `fermix setup` reads them
    "fermix_core.setup_secrets",
    "fermix_core.setup_personalization",
    "fermix_core.doctor",
    "fermix_core.doctor_checks",
    "fermix_channels.setup",
    "fermix_channels.config",  # channel config models: their secret slots come from the cache
    "fermix_channels.telegram.config",
    "fermix_channels.slack.config",
    "fermix_channels.discord.config",
    "fermix_channels.whatsapp.config",
    "fermix_channels.signal.config",
    "fermix_channels.acp.config",
    "fermix_tools.files.grep",  # tool implementations: definitions come from the cache
    "fermix_tools.web.fetch",
    "fermix_tools.shell.tools",
    "httpcore",  # httpx's own pool: built only for what the lean transport hands on (HEAD)
    "h11",
    "httpx",  # the model call goes straight onto the HTTP/1.1 pool (DirectClient) …
    "email",  # … so neither httpx nor what it brings is imported
    "http.client",
    "http.cookiejar",
    "urllib.request",
    "mimetypes",
    "idna",
    "fermix_providers.wires.responses",  # the model speaks Chat Completions
    "fermix_providers.wires.anthropic_messages",
    "yaml",  # skill front matter comes from the cache
    "importlib.metadata",  # entry points (Fermix's and pydantic's groups) come from the cache
    "csv",
    "tomlkit",  # config.toml is read with tomllib; tomlkit only edits it
    "difflib",  # "did you mean" hints are made when there is a mistake to hint at
    "logging.handlers",  # the log file rotates without it (it imports pickle, queue …)
    "pickle",
    "zipfile",  # prompt templates are read as files; importlib.resources only if zipped
    "typer",
    "click",
    # First-party plugins' registration modules: their specs come from the cache.
    "fermix_channels",  # (and no channel runs in a one-off ask)
    "fermix_tools",  # (a tool's module loads when the model calls it)
    "fermix_providers.anthropic",
    "fermix_providers.openai.plugin",
    "fermix_providers.ollama.plugin",
    "fermix_providers.transcription",
    "fermix_providers.listing",  # model listing and probes; a turn needs only the base URL
)


def completion(request: RecordedRequest) -> Reply:
    return chat_completion(ANSWER)


@pytest.fixture
def ask(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FERMIX_", "OLLAMA_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    with ThreadedLoopback(completion) as model:
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\nprimary = true\n"
            f'base_url = "{model.url}/v1"\ndefault_model = "qwen3"\n'
        )

        def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-c", code, *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )

        def run(session: str) -> dict:
            out = python(PROBE, session)
            assert out.returncode == 0, out.stderr
            assert ANSWER in out.stdout
            return json.loads(out.stdout.strip().splitlines()[-1])

        yield run, home, python


def test_a_cold_ask_loads_only_what_the_turn_needs(ask) -> None:
    run, home, _python = ask
    first = run("first")
    assert first["code"] == 0
    assert (home / "cache" / "generated-code.bin").exists()
    assert first["frozen"] > 0  # start-up objects went to the permanent generation
    assert first["compiled"] > 100  # an empty cache: every dataclass method compiled
    assert (home / "cache" / "tool-definitions.json").exists()
    assert (home / "cache" / "skill-front-matter.json").exists()
    assert (home / "cache" / "config-model-shapes.json").exists()
    assert (home / "cache" / "plugin-specs.json").exists()

    second = run("second")
    assert second["code"] == 0
    loaded = [
        m for m in second["modules"] if any(m == p or m.startswith(p + ".") for p in NOT_NEEDED)
    ]
    assert loaded == []
    assert second["compiled"] == 0  # every generated dataclass method came from the cache
    # Modules loaded after the arguments were parsed come without module and function
    # docstrings, from the home's lean bytecode; class docstrings stay (pydantic reads them).
    assert second["lean_modules"] > 250
    assert second["lean_cached"] == second["lean_modules"]
    assert second["lean_docs"] == []
    assert second["function_doc"] is None
    assert second["class_doc"]
    # The runtime's client never built a TLS context, let alone loaded certificates: the
    # model is plain http://.
    assert second["lazy_built"] and not any(second["lazy_built"])
    assert second["trust_loaded"] == []  # not even an unloaded SSLContext was made
    # Where each module is came from the first run's record (``python -c`` puts the
    # working directory first on sys.path, so top-level names are searched as usual).
    assert list((home / "cache" / "bytecode" / leancode.RULES).glob("module-specs.*.bin"))
    assert second["located"] > 200


def test_the_typer_form_of_a_cold_ask_keeps_its_help_texts(ask) -> None:
    """An ask the fast path does not parse goes through typer, whose help texts are the
    commands' docstrings: those modules are loaded with them."""
    _run, _home, python = ask
    out = python(
        "import sys; from fermix_core.cli.entry import main; "
        "sys.argv = ['fermix', 'ask', '--help']; sys.exit(main())"
    )
    assert out.returncode == 0, out.stderr
    assert "Ask Fermix one thing and print the reply." in out.stdout
