"""The Signal channel: a supervised ``signal-cli jsonRpc`` child process.

One task keeps signal-cli running as
``signal-cli [--config DIR] -a ACCOUNT jsonRpc --receive-mode manual --ignore-stories``
(JSON-RPC 2.0 on its stdin/stdout, see :mod:`.rpc`), with a minimal environment — the
usual ``PATH``/``HOME``/locale plus what a Java program needs (``JAVA_HOME``,
``JAVA_OPTS``, ``SIGNAL_CLI_OPTS``, ``XDG_DATA_HOME``) and nothing else, so no provider key
or channel token reaches it — in a process group of its own. It subscribes with
``subscribeReceive`` (manual receive mode: nothing is fetched from Signal before Fermix
listens), then probes it with a ``version`` request every ``probe_every`` seconds.

Failures never reach the daemon: a missing executable, an account signal-cli does not know
("User +… is not registered."), a crash, or a hang (a probe unanswered for
``request_timeout`` seconds: the process group is killed) is reported as ``degraded`` with
what to do, and signal-cli is started again after a capped, jittered backoff (1 s doubling
to 60 s; reset once a session ran for a minute). An unset ``account`` is ``refused``.

Inbound: each ``receive`` notification (plain, or ``subscribeReceive``-style) is parsed
(:mod:`.parse`); one that is a turn is written to ``$FERMIX_HOME/channels/signal-pending.json``
before it is handed to ``host.deliver`` and removed once the gateway has it. signal-cli
acknowledges a message to Signal's servers as soon as it has printed it, so this file is
what keeps a message that arrived just before a stop or crash: it is delivered on the next
start, and the durable idempotency record (key ``<sender>:<timestamp>``) turns a message
seen twice into a duplicate. A hand-off the gateway cannot take (stopping) is retried.
Attachments become local-path :class:`~fermix_core.channel.Attachment` entries (the file
signal-cli stored) for an authorized sender only; a stranger's files are never looked at.

Outbound: ``send`` with ``recipient`` or ``groupId``, the plain-text body (dialect
``signal``: the presentation layer splits at 2,000 UTF-8 bytes), ``attachments`` as file
paths (or data URIs for in-memory files), each checked against the 100 MB cap first, and
in groups a quote of the message answered. Reactions (``sendReaction``) and typing
(``sendTyping``). Signal has no Approve button: the sandbox approval prompt goes out as
text with its ``/confirm TOKEN`` line, in groups too.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx
from fermix_core.channel import (
    Attachment,
    Channel,
    ChannelError,
    ChannelHost,
    ChannelTransientError,
    DeliveryUnavailable,
    InboundMessage,
    OutboundMessage,
    SentMessage,
)
from fermix_core.gateway.trust import TrustPolicy

from fermix_channels.signal.config import SignalConfig
from fermix_channels.signal.parse import (
    GROUP_PREFIX,
    SignalRef,
    Skip,
    envelope_of,
    local_attachments,
    parse_envelope,
    split_message_id,
)
from fermix_channels.signal.rpc import (
    RpcProcess,
    SignalCliGone,
    SignalCliTimeout,
    failure_of,
    open_rpc,
)

__all__ = [
    "CHILD_ENV",
    "MEDIA_CAP",
    "PENDING_FILE",
    "SignalChannel",
    "attachments_folder",
    "child_env",
    "find_executable",
    "signal_cli_argv",
]

log = logging.getLogger("fermix_channels.signal")

_MB = 1024 * 1024
#: Signal's attachment limit, every kind.
MEDIA_CAP = 100 * _MB
#: Messages read from signal-cli and not yet handed to the gateway, relative to FERMIX_HOME.
PENDING_FILE = "channels/signal-pending.json"
#: Host variables signal-cli gets (besides nothing): the basics and what Java needs.
CHILD_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "TMPDIR",
    "USER",
    "TZ",
    "JAVA_HOME",
    "JAVA_OPTS",
    "SIGNAL_CLI_OPTS",
    "XDG_DATA_HOME",
)
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_BACKOFF_START = 1.0
_BACKOFF_CAP = 60.0
#: A session that stayed up this long resets the restart backoff.
_STABLE_AFTER = 60.0
#: How long start() waits for the first session before reporting "still starting".
_START_WAIT = 20.0
_DOCS = "see docs/channels/signal.md"


def child_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """signal-cli's environment: :data:`CHILD_ENV` from *environ*, nothing more."""
    host = os.environ if environ is None else environ
    env = {name: host[name] for name in CHILD_ENV if host.get(name)}
    env.setdefault("PATH", _DEFAULT_PATH)
    env.setdefault("LANG", "C.UTF-8")
    return env


def find_executable(
    cli_path: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """``(path, None)`` for the signal-cli to run, or ``(None, what to do)``."""
    host = os.environ if environ is None else environ
    search = host.get("PATH") or _DEFAULT_PATH
    if cli_path:
        expanded = os.path.expanduser(cli_path)
        if os.sep not in expanded:
            found = shutil.which(expanded, path=search)
            if found is None:
                return None, (
                    f"signal-cli {cli_path!r} (cli_path / SIGNAL_CLI_PATH) is not on PATH; "
                    f"give its full path or install signal-cli ({_DOCS})"
                )
            return found, None
        if not os.path.isfile(expanded):
            return None, (
                f"signal-cli was not found at {expanded} (cli_path / SIGNAL_CLI_PATH); "
                f"install it there or fix the path ({_DOCS})"
            )
        if not os.access(expanded, os.X_OK):
            return None, f"{expanded} is not executable; run `chmod +x {expanded}`"
        return expanded, None
    found = shutil.which("signal-cli", path=search)
    if found is None:
        return None, (
            "signal-cli is not installed (not found on PATH); install it and register or "
            "link the account, or set SIGNAL_CLI_PATH / [fermix_channels.signal] cli_path "
            f"to its path ({_DOCS})"
        )
    return found, None


def signal_cli_argv(executable: str, config: SignalConfig) -> list[str]:
    argv = [executable]
    if config.config_dir:
        argv += ["--config", os.path.expanduser(config.config_dir)]
    argv += ["-a", str(config.account), "jsonRpc", "--receive-mode", "manual", "--ignore-stories"]
    return argv


def attachments_folder(config: SignalConfig, environ: Mapping[str, str] | None = None) -> Path:
    """Where signal-cli stores received attachments: ``<data dir>/attachments``."""
    host = os.environ if environ is None else environ
    if config.config_dir:
        base = Path(os.path.expanduser(config.config_dir))
    elif host.get("XDG_DATA_HOME"):
        base = Path(host["XDG_DATA_HOME"]) / "signal-cli"
    else:
        home = host.get("HOME") or os.path.expanduser("~")
        base = Path(home) / ".local" / "share" / "signal-cli"
    return base / "attachments"


def _target(chat_id: str) -> dict[str, Any]:
    if chat_id.startswith(GROUP_PREFIX):
        group = chat_id[len(GROUP_PREFIX) :]
        if not group:
            raise ChannelError(f"{chat_id!r} is not a Signal group chat id")
        return {"groupId": group}
    return {"recipient": [chat_id]}


def _exit_problem(account: str, code: int | None, tail: list[str]) -> str:
    text = "\n".join(tail)
    last = next((line for line in reversed(tail) if line.strip()), "")
    if "is not registered" in text or "No local account" in text or "not registered" in last:
        return (
            f"signal-cli says {account} is not registered on this machine: register it "
            f"(`signal-cli -a {account} register`, then `signal-cli -a {account} verify "
            "CODE`) or link it to your phone as a secondary device (`signal-cli link -n "
            f"fermix`), using the same config_dir ({_DOCS})"
        )
    if "in use by another instance" in text or "Config file is in use" in text:
        return (
            "another signal-cli process is using this account's data (only one may at a "
            "time); stop it (a `signal-cli daemon`, a cron `receive`) and Fermix takes over"
        )
    how = f"exited with code {code}" if code is not None else "stopped"
    detail = f": {last[:300]}" if last else ""
    return f"signal-cli {how}{detail}; restarting it (`fermix logs` shows its output)"


class SignalChannel(Channel):
    """The ``signal`` channel (built by the runtime from ``fermix_channels.signal.plugin``)."""

    name = "signal"
    supports_reactions = True
    supports_typing = True
    dialect = "signal"
    max_text = 2000
    text_measure = "chars"
    media_caps: ClassVar[dict[str, int]] = dict.fromkeys(
        ("image", "audio", "video", "document", "voice"), MEDIA_CAP
    )
    reactions_allowed = None
    #: Signal clients show a typing indicator for about 15 s.
    typing_interval = 10.0

    def __init__(
        self,
        config: SignalConfig | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        home: Any = None,
        jitter: Callable[[], float] = random.random,
        probe_every: float = 60.0,
        environ: Mapping[str, str] | None = None,
        **_: Any,
    ) -> None:
        self.config = config if config is not None else SignalConfig()
        self._home = home
        self._jitter = jitter
        self.probe_every = probe_every
        self._environ = environ
        self._trust = TrustPolicy.from_section(self.config, channel=self.name)
        known = {*self.config.allowed_ids(), *self.config.command_allowlist}
        if self.config.owner_user_id:
            known.add(self.config.owner_user_id)
        self._known = frozenset(known)
        self.host: ChannelHost | None = None
        self._rpc: RpcProcess | None = None
        self._scope: anyio.CancelScope | None = None
        self._done: anyio.Event | None = None
        self._first: anyio.Event | None = None
        self._problem: str | None = None
        self._pending: dict[str, dict[str, Any]] = {}
        self._spool_lock = anyio.Lock()
        self._queue_send: Any = None
        #: Sessions that reached "subscribed" (for tests and the benchmark).
        self.sessions = 0
        self.subscribed = anyio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: ChannelHost) -> None:
        self.host = host
        host.report("starting")
        if not self.config.account:
            host.report(
                "refused",
                "[fermix_channels.signal] account is not set: set it (or SIGNAL_ACCOUNT) to "
                "the number signal-cli is registered with, e.g. +15551234567, or run "
                "`fermix setup --reconfigure --step signal`",
            )
            return
        self._problem = None
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._first = anyio.Event()
        self.subscribed = anyio.Event()
        host.task_group.start_soon(self._run, self._scope, self._done, self._first)
        with anyio.move_on_after(_START_WAIT):
            await self._first.wait()
        if not self._first.is_set():
            self._degraded(
                "signal-cli has not answered yet (the Java runtime is starting); it reports "
                "ready once subscribed"
            )

    async def stop(self) -> None:
        scope, self._scope = self._scope, None
        done, self._done = self._done, None
        if scope is not None:
            scope.cancel()
        if done is not None:
            with anyio.move_on_after(15.0):
                await done.wait()  # signal-cli shut down and its group is gone
        self._rpc = None
        self._pending.clear()
        self.host = None

    async def _run(self, scope: anyio.CancelScope, done: anyio.Event, first: anyio.Event) -> None:
        try:
            with scope:
                send, receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](256)
                self._queue_send = send
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._consume, receive)
                    for key, envelope in await self._load_pending():
                        await send.send((key, envelope))
                    await self._supervise(first)
        finally:
            self._queue_send = None
            self._rpc = None
            done.set()

    async def _supervise(self, first: anyio.Event) -> None:
        attempt = 0
        while True:
            problem, ready_for = await self._session(first)
            if ready_for >= _STABLE_AFTER:
                attempt = 0
            delay = min(_BACKOFF_CAP, _BACKOFF_START * 2**attempt) * (0.5 + 0.5 * self._jitter())
            attempt = min(attempt + 1, 16)
            self._degraded(f"{problem}; next try in {delay:.0f}s")
            first.set()
            await anyio.sleep(delay)

    async def _session(self, first: anyio.Event) -> tuple[str, float]:
        """Run signal-cli once: what went wrong, and how long it was subscribed."""
        executable, problem = find_executable(self.config.cli_path, self._env_source())
        if executable is None:
            return str(problem), 0.0
        argv = signal_cli_argv(executable, self.config)
        env = child_env(self._env_source())
        timeout = float(self.config.request_timeout)
        ready_at: float | None = None
        try:
            async with open_rpc(
                argv, env=env, cwd=self._cwd(), on_notification=self._on_notification
            ) as rpc:
                self._rpc = rpc
                try:
                    try:
                        await rpc.request("subscribeReceive", timeout=timeout)
                    except SignalCliGone:
                        code = await rpc.wait_exit(5.0)
                        return _exit_problem(
                            str(self.config.account), code, list(rpc.stderr_tail)
                        ), 0.0
                    except SignalCliTimeout:
                        return (
                            f"signal-cli did not answer subscribeReceive within {timeout:g}s; "
                            "restarting it"
                        ), 0.0
                    except ChannelError as exc:
                        return f"signal-cli refused to receive: {exc}", 0.0
                    ready_at = time.monotonic()
                    self.sessions += 1
                    self.subscribed.set()
                    self._recovered()
                    first.set()
                    problem = await self._watch(rpc, timeout)
                    return problem, time.monotonic() - ready_at
                finally:
                    self._rpc = None
        except FileNotFoundError:
            return f"signal-cli could not be started: {executable} does not exist ({_DOCS})", 0.0
        except PermissionError:
            return f"signal-cli could not be started: {executable} is not executable", 0.0
        except OSError as exc:
            return f"signal-cli could not be started ({executable}): {exc}", 0.0

    async def _watch(self, rpc: RpcProcess, timeout: float) -> str:
        """Probe a subscribed signal-cli until it exits or stops answering."""
        while True:
            with anyio.move_on_after(self.probe_every):
                await rpc.closed.wait()
            if not rpc.closed.is_set():
                try:
                    await rpc.request("version", timeout=timeout)
                except SignalCliTimeout:
                    return (
                        f"signal-cli stopped answering (a health probe got no reply in "
                        f"{timeout:g}s); restarting it"
                    )
                except SignalCliGone:
                    pass
                except ChannelError as exc:  # an answer, even a refusal, means it is alive
                    log.debug("signal: probe answered with an error: %s", exc)
                    continue
                else:
                    continue
            code = await rpc.wait_exit(5.0)
            return _exit_problem(str(self.config.account), code, list(rpc.stderr_tail))

    def _env_source(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def _home_path(self) -> Path | None:
        home = self._home if self._home is not None else getattr(self.host, "home", None)
        path = getattr(home, "path", None)
        return Path(path) if path is not None else None

    def _cwd(self) -> str:
        home = self._home_path()
        return str(home) if home is not None and home.is_dir() else "/"

    # ------------------------------------------------------------------ health

    def _degraded(self, problem: str) -> None:
        if problem != self._problem:
            log.warning("signal: %s", problem)
        self._problem = problem
        if self.host is not None:
            self.host.report("degraded", problem)

    def _recovered(self) -> None:
        if self._problem is not None:
            log.info("signal: signal-cli is running and subscribed again")
        self._problem = None
        if self.host is not None:
            self.host.report("ready")

    # ------------------------------------------------------------------ inbound

    def parse(self, envelope: Mapping[str, Any]) -> InboundMessage | Skip:
        return parse_envelope(
            envelope,
            account=str(self.config.account),
            channel=self.name,
            known_ids=self._known,
        )

    async def _on_notification(self, notification: dict[str, Any]) -> None:
        envelope = envelope_of(notification)
        if envelope is None:
            log.debug("signal: ignored a %s notification", notification.get("method"))
            return
        message = self.parse(envelope)
        if isinstance(message, Skip):
            log.debug("signal: skipped an envelope: %s", message.reason)
            return
        key = str(message.message_id)
        with anyio.CancelScope(shield=True):  # read from signal-cli: keep it before anything
            await self._spool(key, envelope)
        send = self._queue_send
        if send is not None:
            await send.send((key, envelope))

    async def _consume(self, receive: Any) -> None:
        async with receive:
            async for key, envelope in receive:
                await self._deliver_until_taken(envelope)
                with anyio.CancelScope(shield=True):
                    await self._unspool(key)

    async def _deliver_until_taken(self, envelope: Mapping[str, Any]) -> None:
        backoff = _BACKOFF_START
        while True:
            try:
                result = await self.handle_envelope(envelope)
                log.debug("signal: envelope %s", result)
                return
            except DeliveryUnavailable as exc:
                log.warning("signal: hand-off failed, retrying: %s", exc)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_CAP)

    async def handle_envelope(self, envelope: Mapping[str, Any]) -> str:
        """One envelope: ``accepted``, ``duplicate``, ``dropped`` or ``skipped``."""
        message = self.parse(envelope)
        if isinstance(message, Skip):
            return "skipped"
        host = self.host
        if host is None:
            raise DeliveryUnavailable("the signal channel is stopping")
        ref = message.raw_ref
        if isinstance(ref, SignalRef) and ref.attachments:
            message = await self._with_attachments(message, ref)
        result = await host.deliver(message)
        return str(result.value)

    async def _with_attachments(self, message: InboundMessage, ref: SignalRef) -> InboundMessage:
        """Only an authorized sender's files are looked at; a stranger's are never touched
        (the gateway drops the message)."""
        if self._trust.authorize(message.sender_id) is None:
            return message
        folder = attachments_folder(self.config, self._env_source())
        attachments, notes = await anyio.to_thread.run_sync(
            local_attachments, ref.attachments, folder
        )
        text = "\n".join([message.text, *notes]).strip() if notes else message.text
        return message.model_copy(update={"attachments": attachments, "text": text})

    # ------------------------------------------------------------------ pending file

    def _pending_path(self) -> Path | None:
        home = self._home_path()
        return home / PENDING_FILE if home is not None else None

    async def _load_pending(self) -> list[tuple[str, dict[str, Any]]]:
        path = self._pending_path()
        if path is None:
            return []

        def read() -> Any:
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                return None
            except (OSError, ValueError):
                log.warning("signal: %s is unreadable; nothing to re-deliver from it", path)
                return None

        data = await anyio.to_thread.run_sync(read)
        if not isinstance(data, dict) or data.get("account") != self.config.account:
            return []
        items = data.get("pending")
        found: list[tuple[str, dict[str, Any]]] = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                message = self.parse(item)
                if not isinstance(message, Skip):
                    self._pending[str(message.message_id)] = item
                    found.append((str(message.message_id), item))
        if found:
            log.info("signal: re-delivering %d message(s) read before the last stop", len(found))
        return found

    async def _write_pending(self) -> None:
        path = self._pending_path()
        if path is None:
            return
        from fermix_core.fsutil import atomic_write

        state = {"account": self.config.account, "pending": list(self._pending.values())}
        text = json.dumps(state, ensure_ascii=False) + "\n"

        def write() -> None:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(path, text)

        await anyio.to_thread.run_sync(write)

    async def _spool(self, key: str, envelope: dict[str, Any]) -> None:
        async with self._spool_lock:
            self._pending[key] = envelope
            await self._write_pending()

    async def _unspool(self, key: str) -> None:
        async with self._spool_lock:
            if self._pending.pop(key, None) is not None:
                await self._write_pending()

    # ------------------------------------------------------------------ outbound

    def _live(self) -> RpcProcess:
        rpc = self._rpc
        if rpc is None or rpc.closed.is_set():
            raise ChannelTransientError(
                "signal-cli is not running right now (starting or restarting); "
                f"{self._problem or 'try again shortly'}"
            )
        return rpc

    async def _attachment_arg(self, item: Attachment) -> str:
        label = item.filename or (item.path.name if item.path is not None else "this file")
        size = item.size
        if item.path is not None:
            try:
                stat = await anyio.Path(item.path).stat()
            except OSError as exc:
                raise ChannelError(f"cannot send {label}: {exc}") from exc
            size = stat.st_size
        if size is not None and size > MEDIA_CAP:
            raise ChannelError(
                f"Signal accepts attachments up to {MEDIA_CAP // _MB} MB; {label} is "
                f"{size / _MB:.1f} MB — compress it, split it, or send a link instead"
            )
        if item.path is not None:
            return str(Path(item.path).resolve())
        data = item.data or b""
        mime = item.mime_type or "application/octet-stream"
        name = f";filename={item.filename}" if item.filename else ""
        return f"data:{mime}{name};base64,{base64.b64encode(data).decode('ascii')}"

    async def send(self, message: OutboundMessage) -> SentMessage:
        params = _target(message.chat_id)
        if message.text.strip():
            params["message"] = message.text
        if message.attachments:
            params["attachments"] = [await self._attachment_arg(a) for a in message.attachments]
        if message.reply_to and "groupId" in params:
            quoted = split_message_id(message.reply_to)
            if quoted is not None:
                params["quoteAuthor"], params["quoteTimestamp"] = quoted
        factor = 10 if message.attachments else 1
        result = await self._live().request(
            "send", params, timeout=float(self.config.request_timeout) * factor
        )
        failure = failure_of(_types(result), "send")
        if failure is not None:
            raise failure
        timestamp = result.get("timestamp") if isinstance(result, dict) else None
        if not isinstance(timestamp, int):
            raise ChannelError("signal-cli send answered without a timestamp")
        return SentMessage(message_id=f"{self.config.account}:{timestamp}")

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        target = split_message_id(message_id)
        if target is None:
            raise ChannelError(f"{message_id!r} is not a Signal message id (<author>:<timestamp>)")
        value = emoji.strip()
        if not value or len(value) > 16 or any(ch.isspace() for ch in value):
            raise ChannelError(f"a Signal reaction is one emoji, not {emoji!r}")
        params = {
            **_target(chat_id),
            "emoji": value,
            "targetAuthor": target[0],
            "targetTimestamp": target[1],
        }
        await self._live().request(
            "sendReaction", params, timeout=float(self.config.request_timeout)
        )

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        await self._live().request(
            "sendTyping", _target(chat_id), timeout=float(self.config.request_timeout)
        )


def _types(result: Any) -> list[str]:
    results = result.get("results") if isinstance(result, dict) else None
    if not isinstance(results, list):
        return []
    return [str(r.get("type")) for r in results if isinstance(r, dict) and r.get("type")]
