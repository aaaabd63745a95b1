"""The doctor's Ollama row: real config, real routing, a fake Ollama on a real loopback socket."""

from __future__ import annotations

import importlib
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fermix_core.boot import assemble
from fermix_core.doctor import CheckResult, DoctorContext, Status, run_checks
from fermix_core.home import FermixHome
from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback
from fermix_providers import catalog, doctor


class FakeOllama:
    """``/api/show`` and ``/api/ps`` for the models it is told about; 404 for the rest."""

    def __init__(self) -> None:
        #: model -> (num_ctx pinned in the Modelfile or None, trained context length)
        self.pulled: dict[str, tuple[int | None, int]] = {}
        #: model (with tag) -> context it is loaded with
        self.loaded: dict[str, int] = {}

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.path == "/api/show":
            model = request.json()["model"]
            if model not in self.pulled:
                return Reply(status=404, body={"error": f"model '{model}' not found"})
            pinned, trained = self.pulled[model]
            return Reply(
                body={
                    "parameters": f"num_ctx {pinned}\nstop <|im_end|>" if pinned else "",
                    "model_info": {
                        "general.architecture": "qwen3",
                        "qwen3.context_length": trained,
                    },
                }
            )
        if request.path == "/api/ps":
            rows = [{"name": n, "model": n, "context_length": c} for n, c in self.loaded.items()]
            return Reply(body={"models": rows})
        return Reply(status=404, body={"error": "unknown route"})


@pytest.fixture
def ollama() -> Iterator[tuple[ThreadedLoopback, FakeOllama]]:
    fake = FakeOllama()
    with ThreadedLoopback(fake) as server:
        yield server, fake


def assembly_for(home: FermixHome, config: str, environ: dict[str, str] | None = None):
    home.config_file.write_text(config)
    home.config_file.chmod(0o600)
    plugins: list[tuple[str, Any]] = [
        (f"providers.{name}", importlib.import_module(module))
        for name, module in catalog.PLUGIN_MODULES.items()
    ]
    plugins.append(("providers.doctor", doctor))
    env = {"FERMIX_HOME": str(home.path), **(environ or {})}
    assembly = assemble(home, environ=env, plugins=plugins, entry_points=False)
    assert assembly.registry.errors == []
    return assembly


def ollama_rows(home: FermixHome, config: str, environ: dict[str, str] | None = None):
    assembly = assembly_for(home, config, environ)
    context = DoctorContext(assembly, assembly.load_config())
    return [r for r in run_checks(context) if r.check == "ollama"]


def ollama_block(url: str, model: str | None = None, *, primary: bool = True) -> str:
    lines = ["[fermix_core.providers.ollama]", f'base_url = "{url}/v1"']
    if primary:
        lines.append("primary = true")
    if model:
        lines.append(f'default_model = "{model}"')
    return "\n".join(lines) + "\n"


OPENAI_PRIMARY = '[fermix_core.providers.openai]\nprimary = true\ndefault_model = "gpt-5.5"\n'
OPENAI_ENV = {"OPENAI_API_KEY": "sk-doctor-test"}


# --------------------------------------------------------------------------- registration


def test_the_hook_registers_a_sound_spec() -> None:
    [spec] = list(doctor.fermix_doctor_checks())
    assert spec is doctor.OLLAMA_CHECK
    assert (spec.name, spec.label, spec.order) == ("ollama", "ollama", 65)
    assert spec.problems() == []


def test_loading_the_plugin_imports_no_http_stack() -> None:
    code = (
        "import sys, fermix_providers.doctor as d; "
        "print(sorted(m for m in ('httpx', 'anyio', 'fermix_providers.listing', "
        "'fermix_core.routing.routes') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------- outcomes


def test_a_primary_served_with_its_full_window_is_ok(fermix_home, ollama) -> None:
    server, fake = ollama
    fake.pulled["qwen3"] = (40_960, 40_960)
    [row] = ollama_rows(fermix_home, ollama_block(server.url))
    assert row.label == "ollama qwen3 (primary)"
    assert row.status is Status.OK
    assert "served with 40960 tokens" in row.detail
    assert row.fix is None
    shows = [r for r in server.requests if r.path == "/api/show"]
    assert [r.json() for r in shows] == [{"model": "qwen3"}]


def test_a_fallback_served_with_too_little_context_fails_with_the_fix(fermix_home, ollama) -> None:
    server, fake = ollama
    fake.pulled["llama3.2"] = (4096, 131_072)
    config = OPENAI_PRIMARY + ollama_block(server.url, "llama3.2", primary=False)
    [row] = ollama_rows(fermix_home, config, OPENAI_ENV)
    assert row.label == "ollama llama3.2 (fallback)"
    assert row.status is Status.FAIL
    assert "num_ctx 4096" in row.detail and "131072-token catalog window" in row.detail
    assert row.fix is not None and "OLLAMA_CONTEXT_LENGTH=131072" in row.fix


def test_a_window_that_cannot_be_read_is_a_warning(fermix_home, ollama) -> None:
    server, fake = ollama
    fake.pulled["qwen3"] = (None, 40_960)  # nothing pinned, and not loaded
    [row] = ollama_rows(fermix_home, ollama_block(server.url))
    assert row.status is Status.WARN
    assert "pins no num_ctx and is not loaded" in row.detail
    assert row.fix is not None and "num_ctx 40960" in row.fix


def test_a_loaded_model_reports_what_it_was_given(fermix_home, ollama) -> None:
    server, fake = ollama
    fake.pulled["qwen3"] = (None, 40_960)
    fake.loaded["qwen3:latest"] = 40_960
    [row] = ollama_rows(fermix_home, ollama_block(server.url))
    assert row.status is Status.OK
    assert "the loaded model (ollama ps)" in row.detail


def test_a_model_that_is_not_pulled_fails_with_the_pull_command(fermix_home, ollama) -> None:
    server, _ = ollama
    [row] = ollama_rows(fermix_home, ollama_block(server.url, "gemma3:12b"))
    assert row.status is Status.FAIL
    assert "'gemma3:12b' is not pulled" in row.detail
    assert row.fix == "ollama pull gemma3:12b"


def test_a_server_that_is_not_running_fails_with_how_to_start_it(fermix_home) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and now refuses
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    [row] = ollama_rows(fermix_home, ollama_block(f"http://127.0.0.1:{port}"))
    assert row.status is Status.FAIL
    assert f"cannot reach Ollama at http://127.0.0.1:{port}" in row.detail
    assert row.fix is not None and "ollama serve" in row.fix


def test_credentials_in_the_server_url_never_reach_the_row(fermix_home, ollama) -> None:
    server, fake = ollama
    fake.pulled["qwen3"] = (2048, 40_960)
    url = server.url.replace("http://", "http://ops:hunter2-secret@")
    [row] = ollama_rows(fermix_home, ollama_block(url))
    assert row.status is Status.FAIL
    text = json.dumps(row.as_dict())
    assert "hunter2-secret" not in text and "ops:" not in text
    assert server.url in row.detail  # the host is still named


# --------------------------------------------------------------------------- which routes


def test_no_row_when_ollama_is_not_in_routing(fermix_home, ollama) -> None:
    server, _ = ollama
    assert ollama_rows(fermix_home, OPENAI_PRIMARY, OPENAI_ENV) == []
    assert server.requests == []


def test_no_row_and_no_crash_when_the_config_did_not_load(fermix_home) -> None:
    assembly = assembly_for(fermix_home, "[fermix_core.agent]\ntimezone = 'Mars/Base'\n")
    context = DoctorContext(assembly, None)
    assert doctor.check_ollama(context) == []


def test_overlays_are_probed_and_shared_models_are_probed_once(fermix_home, ollama) -> None:
    server, fake = ollama
    fake.pulled["qwen3"] = (40_960, 40_960)
    fake.pulled["llama3.2"] = (131_072, 131_072)
    config = (
        OPENAI_PRIMARY
        + ollama_block(server.url, "qwen3", primary=False)
        + "[fermix_core.routing]\n"
        + 'subagent_provider = "ollama"\nsubagent_model = "qwen3"\n'
        + 'cron_provider = "ollama"\ncron_model = "llama3.2"\n'
    )
    rows = ollama_rows(fermix_home, config, OPENAI_ENV)
    assert [(r.label, r.status) for r in rows] == [
        ("ollama qwen3 (fallback, sub-agents)", Status.OK),
        ("ollama llama3.2 (scheduled jobs)", Status.OK),
    ]
    shows = [r.json()["model"] for r in server.requests if r.path == "/api/show"]
    assert shows == ["qwen3", "llama3.2"]


def test_a_broken_overlay_is_left_to_the_providers_row(fermix_home, ollama) -> None:
    server, fake = ollama
    fake.pulled["qwen3"] = (40_960, 40_960)
    config = (
        ollama_block(server.url)
        + "[fermix_core.routing]\n"
        + 'cron_provider = "openai"\ncron_model = "gpt-5.5"\n'  # openai has no key here
    )
    rows: list[CheckResult] = ollama_rows(fermix_home, config)
    assert [(r.label, r.status) for r in rows] == [("ollama qwen3 (primary)", Status.OK)]
