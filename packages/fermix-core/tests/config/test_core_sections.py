"""Defaults and value validation of every core section."""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.config.models import ReasoningEffort
from fermix_core.specs import REASONING_EFFORTS


def test_missing_file_gives_every_default(home, registry) -> None:
    from fermix_core.config import load_config

    loaded = load_config(home, registry, environ={})
    core = loaded.core.fermix_core
    assert not home.path.exists(), "loading must not create FERMIX_HOME"
    assert core.profile == "general"
    assert (core.agent.name, core.agent.timezone) == ("fermix", "America/New_York")
    assert core.agent.user_name is None
    assert core.agent.provider is None
    assert core.providers == {}
    assert core.tools.web_search.backend == "duckduckgo"
    assert core.tools.tool_search.enabled is None
    assert core.tools.tool_search.is_enabled
    assert core.transcription.backend == "openai"
    assert core.transcription.max_file_mb == 20
    assert core.compaction.enabled is True
    assert core.compaction.threshold == 0.85
    assert core.jobs.run_freshness_window_seconds == 3600
    assert core.jobs.network_readiness_enabled is True
    assert (core.memory.backend, core.memory.review_enabled, core.memory.review_interval_hours) == (
        "sqlite",
        True,
        24,
    )
    assert core.realtime.enabled is False
    assert core.realtime.screen_share is True
    assert core.computer_use.enabled is False
    assert core.plugins.disabled == []
    assert core.harness.enabled
    assert not core.harness.approved
    assert not core.harness.cloud_enabled
    assert core.harness.default_vendor is None
    assert core.plugin_secrets == {}
    sandbox = loaded.core.sandbox
    assert sandbox.mode == "standard"
    assert sandbox.command_profile == "assistant"
    assert sandbox.workspace_root == home.workspace
    assert loaded.core.mcp.servers == {}
    assert loaded.warnings == []
    assert loaded.env_applied == []
    assert loaded.sections == {}


def test_effort_vocabulary_matches_the_spec_vocabulary() -> None:
    import typing

    assert typing.get_args(ReasoningEffort) == REASONING_EFFORTS


def test_a_full_valid_file_loads(load) -> None:
    loaded = load(
        """
[fermix_core]
profile = "work-laptop"

[fermix_core.agent]
name = "Jarvis"
timezone = "Europe/Berlin"
user_name = "Ada"
communication_style = "terse"

[fermix_core.providers.openai]
primary = true
default_model = "gpt-5.5"
reasoning_effort = "xhigh"
fast = true
wire = "responses"
api_key = "@keyring"

[fermix_core.providers.anthropic]
auth_mode = "oauth"
reasoning_effort = "low"

[fermix_core.tools.web_search]
backend = "brave"
api_key = { source = "env", env = "MY_BRAVE" }
max_results = 20

[fermix_core.tools.tool_search]
enabled = false

[fermix_core.tools.generate_image]
backend = "openai_codex"
router_model = "gpt-5.5"
size = "1024x1024"

[fermix_core.transcription]
backend = "deepgram"
model = "nova-3"
max_file_mb = 5
deepgram_api_key = { source = "command", command = ["pass", "show", "deepgram"], timeout = 3 }

[fermix_core.compaction]
threshold = 1.0

[fermix_core.jobs]
run_freshness_window_seconds = 60
network_readiness_enabled = false

[fermix_core.memory]
review_interval_hours = 6

[fermix_core.realtime]
enabled = true
screen_share = false

[fermix_core.computer_use]
enabled = true

[fermix_core.plugins]
disabled = ["channels.slack"]

[fermix_core.routing]
subagent_model = "gpt-5.4-mini"
subagent_provider = "openai"
subagent_reasoning_effort = "low"
cron_provider = "anthropic"
cron_reasoning_effort = "none"

[fermix_core.harness]
approved = true
default_vendor = "claude_code"

[fermix_core.oauth.google]
client_id = "123.apps.googleusercontent.com"
client_secret = "@keyring"

[fermix_core.plugin_secrets]
notion = "@keyring"

[sandbox]
mode = "strict"
workspace_root = "~/fermix-work"
allowed_roots = ["/srv/data", "~/code"]
command_profile = "extended"

[sandbox.env]
allow = ["LANG", "AWS_*"]
deny = ["GITHUB_TOKEN"]
set = { EDITOR = "vi" }

[mcp.servers.files]
command = ["npx", "-y", "@modelcontextprotocol/server-filesystem"]
env = { DEBUG = "1" }

[mcp.servers.remote]
url = "https://mcp.example.com/sse"
headers = { Authorization = "Bearer x" }
enabled = false
"""
    )
    core = loaded.core.fermix_core
    assert core.profile == "work-laptop"
    assert core.agent.timezone == "Europe/Berlin"
    assert loaded.provider_config("openai").reasoning_effort == "xhigh"
    assert loaded.provider_config("anthropic").auth_mode == "oauth"
    assert loaded.provider_config("openrouter") is None
    assert core.primary_provider() == "openai"
    assert core.tools.web_search.api_key.env == "MY_BRAVE"
    assert core.tools.tool_search.is_enabled is False
    assert core.transcription.deepgram_api_key.command == ["pass", "show", "deepgram"]
    assert core.oauth.google.client_secret == "@keyring"
    assert core.oauth.github is None
    sandbox = loaded.core.sandbox
    assert sandbox.workspace_root == Path("~/fermix-work").expanduser()
    assert sandbox.allowed_roots == [Path("/srv/data"), Path("~/code").expanduser()]
    assert sandbox.env.set == {"EDITOR": "vi"}
    assert loaded.core.mcp.servers["remote"].enabled is False
    assert loaded.section("fermix_core.compaction").threshold == 1.0
    assert loaded.get("fermix_core.harness.default_vendor") == "claude_code"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[fermix_core]\nprofile = "a:b"', "fermix_core.profile: "),
        (
            '[fermix_core.agent]\ntimezone = "Mars/Olympus_Mons"',
            'unknown timezone "Mars/Olympus_Mons"',
        ),
        ('[fermix_core.agent]\ntimezone = "../../etc/passwd"', "use an IANA name"),
        ("[fermix_core.agent]\nname = 7", "fermix_core.agent.name: must be a string (got 7)"),
        (
            "[fermix_core.tools.web_search]\nmax_results = 21",
            "fermix_core.tools.web_search.max_results: must be at most 20 (got 21)",
        ),
        (
            "[fermix_core.tools.web_search]\nmax_results = 0",
            "fermix_core.tools.web_search.max_results: must be at least 1 (got 0)",
        ),
        (
            '[fermix_core.tools.tool_search]\nenabled = "yes please"',
            'fermix_core.tools.tool_search.enabled: must be true or false (got "yes please")',
        ),
        (
            '[fermix_core.tools.generate_image]\nbackend = "dalle"',
            'fermix_core.tools.generate_image.backend: must be one of "openai", "xai", "google", '
            '"openai_codex" (got "dalle")',
        ),
        (
            '[fermix_core.transcription]\nbackend = "whisper"',
            'fermix_core.transcription.backend: must be one of "openai", "xai", "deepgram" '
            '(got "whisper")',
        ),
        (
            "[fermix_core.transcription]\nmax_file_mb = 0",
            "fermix_core.transcription.max_file_mb: must be greater than 0 (got 0)",
        ),
        (
            "[fermix_core.compaction]\nthreshold = 0",
            "fermix_core.compaction.threshold: must be greater than 0.0 (got 0)",
        ),
        (
            "[fermix_core.compaction]\nthreshold = 1.5",
            "fermix_core.compaction.threshold: must be at most 1.0 (got 1.5)",
        ),
        (
            "[fermix_core.jobs]\nrun_freshness_window_seconds = -5",
            "fermix_core.jobs.run_freshness_window_seconds: must be greater than 0 (got -5)",
        ),
        (
            '[fermix_core.memory]\nbackend = "qdrant"',
            'fermix_core.memory.backend: must be one of "sqlite" (got "qdrant")',
        ),
        (
            "[fermix_core.memory]\nreview_interval_hours = 0",
            "fermix_core.memory.review_interval_hours: must be greater than 0 (got 0)",
        ),
        (
            "[fermix_core.realtime]\nenabled = 1.5",
            "fermix_core.realtime.enabled: must be true or false",
        ),
        (
            '[fermix_core.plugins]\ndisabled = "channels.slack"',
            'fermix_core.plugins.disabled: must be a list (got "channels.slack")',
        ),
        (
            '[fermix_core.plugins]\ndisabled = [""]',
            "fermix_core.plugins.disabled[0]: must not be empty",
        ),
        (
            '[fermix_core.routing]\ncron_reasoning_effort = "extreme"',
            'fermix_core.routing.cron_reasoning_effort: must be one of "none", "low", "medium", '
            '"high", "xhigh", "max" (got "extreme")',
        ),
        (
            '[fermix_core.routing]\nsubagent_provider = "opnai"',
            'fermix_core.routing.subagent_provider: unknown provider "opnai" (did you mean '
            '"openai"?)',
        ),
        (
            '[fermix_core.harness]\ndefault_vendor = "cursor"',
            'fermix_core.harness.default_vendor: must be one of "codex", "claude_code" (got '
            '"cursor")',
        ),
        ('[fermix_core.oauth.dropbox]\nclient_id = "x"', "fermix_core.oauth.dropbox: unknown key"),
        (
            "[fermix_core.oauth.google]\nclient_secret = 5",
            "fermix_core.oauth.google.client_secret: must be a string",
        ),
        (
            "[fermix_core.plugin_secrets]\nnotion = 5",
            "fermix_core.plugin_secrets.notion: must be a string",
        ),
        (
            '[sandbox]\nmode = "yolo"',
            'sandbox.mode: must be one of "strict", "standard", "open" (got "yolo")',
        ),
        (
            '[sandbox]\ncommand_profile = "full"',
            'sandbox.command_profile: must be one of "bare", "assistant", "extended" (got "full")',
        ),
        (
            '[sandbox]\nworkspace_root = "relative/dir"',
            "sandbox.workspace_root: must be an absolute path",
        ),
        (
            '[sandbox]\nallowed_roots = ["/ok", ""]',
            "sandbox.allowed_roots[1]: must be a path, not an empty",
        ),
        (
            '[sandbox.env]\nallow = ["BAD NAME"]',
            'sandbox.env.allow[0]: "BAD NAME" is not an environment',
        ),
        (
            '[sandbox.env]\nset = { "1X" = "y" }',
            'sandbox.env.set: has keys that are not environment variable names: "1X"',
        ),
        (
            '[mcp.servers.both]\ncommand = ["x"]\nurl = "https://x"',
            "mcp.servers.both: set exactly one of command",
        ),
        (
            "[mcp.servers.neither]\nenabled = true",
            "mcp.servers.neither: set exactly one of command",
        ),
        ("[mcp.servers.s]\ncommand = []", "mcp.servers.s.command: must have at least 1 item"),
        (
            '[mcp.servers.s]\nurl = "ftp://example.com"',
            "mcp.servers.s.url: must be an http:// or https:// URL",
        ),
        (
            '[mcp.servers.s]\nurl = "https://x"\nenv = { A = "1" }',
            "mcp.servers.s: env applies only to a command server",
        ),
        (
            '[mcp.servers.s]\ncommand = ["x"]\nheaders = { A = "1" }',
            "mcp.servers.s: headers apply only to a url server",
        ),
        ('[mcp.servers."bad name"]\nurl = "https://x"', "invalid server name: use letters, digits"),
        ("[mcp]\nservers = 3", "mcp.servers: must be a table (got 3)"),
        ("fermix_core = 3", "fermix_core: must be a table (got 3)"),
    ],
)
def test_invalid_values_name_the_key_and_the_fix(problems_of, text: str, expected: str) -> None:
    lines = problems_of(text)
    assert any(expected in line for line in lines), lines
    assert not any("For further information" in line or "pydantic" in line for line in lines)


def test_values_are_not_coerced_across_types(load, problems_of) -> None:
    assert problems_of('[fermix_core.providers.openai]\nprimary = "yes"\n') == [
        'fermix_core.providers.openai.primary: must be true or false (got "yes")'
    ]
    assert problems_of("[fermix_core.transcription]\nmax_file_mb = 2.5\n") == [
        "fermix_core.transcription.max_file_mb: must be an integer (got 2.5)"
    ]
    assert (
        load("[fermix_core.compaction]\nthreshold = 1\n").core.fermix_core.compaction.threshold == 1
    )


def test_secret_forms(load, problems_of) -> None:
    loaded = load(
        '[fermix_core.transcription]\nopenai_api_key = "  sk-padded \\n"\nxai_api_key = "@keyring"'
    )
    assert loaded.core.fermix_core.transcription.openai_api_key == "sk-padded"
    lines = problems_of(
        """
[fermix_core.transcription]
openai_api_key = ""
xai_api_key = "@Keyring"
deepgram_api_key = { source = "vault", path = "x" }
[fermix_core.tools.web_search]
api_key = { source = "env", env = "NOT A NAME" }
[fermix_core.tools.generate_image]
google_api_key = { source = "command", command = [""], timeout = 0 }
[fermix_core.oauth.github]
client_secret = { source = "env", env = "X", extra = 1 }
"""
    )
    text = "\n".join(lines)
    assert "fermix_core.transcription.openai_api_key: is empty; remove the key" in text
    assert (
        'fermix_core.transcription.xai_api_key: unknown secret reference; the only "@" form '
        'is "@keyring"' in text
    )
    assert (
        'fermix_core.transcription.deepgram_api_key: must be a string, "@keyring", or a table with '
        'source = "env" or source = "command"' in text
    )
    assert (
        "fermix_core.tools.web_search.api_key.env: 'NOT A NAME' is not an environment variable name"
        in text
    )
    assert (
        "fermix_core.tools.generate_image.google_api_key.command: the first element must be "
        "the program" in text
    )
    assert "fermix_core.tools.generate_image.google_api_key.timeout: must be greater than 0" in text
    assert (
        'fermix_core.oauth.github.client_secret.extra: unknown key; valid keys: "source", "env"'
        in text
    )
    assert "secret:" not in text  # union tags never leak into key paths


def test_secret_values_never_appear_in_errors(problems_of) -> None:
    lines = problems_of(
        "[fermix_core.providers.openai]\napi_key = 123456789\n[fermix_core.agent]\ntimezone = 1"
    )
    joined = "\n".join(lines)
    assert "fermix_core.providers.openai.api_key: must be a string" in joined
    assert "123456789" not in joined
    assert "fermix_core.agent.timezone: must be a string (got 1)" in joined


def test_workspace_root_defaults_under_fermix_home(load, home) -> None:
    assert load("").core.sandbox.workspace_root == home.path / "workspace"
    assert load('[sandbox]\nworkspace_root = "/srv/ws"').core.sandbox.workspace_root == Path(
        "/srv/ws"
    )
