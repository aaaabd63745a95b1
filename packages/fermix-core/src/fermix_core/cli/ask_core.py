"""``fermix ask`` without the CLI framework: the cold one-off question stays cheap.

The console script's entry point sends a plain ``fermix ask ...`` here directly
(:func:`parse_ask_args` accepts exactly the options ``fermix ask --help`` documents, and
anything else goes through typer as usual), so a one-off question pays neither for typer
nor for the pydantic adapters it builds per parameter. ``ask_cmd`` wraps the same
:func:`ask_command` for typer, so both paths behave identically.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

#: A daemon-less ask waits this long for post-reply work silently, then says it waits …
POST_REPLY_NOTICE_SECONDS = 2.0
#: … up to this long in all, then stops it (the next turn's post-reply work retries it).
POST_REPLY_LIMIT_SECONDS = 60.0


class TurnsFailed(Exception):
    """The turn could not run; the message was printed, :attr:`code` is the exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class LocalSession:
    """One CLI conversation, over the daemon socket when one answers, else in-process."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.cwd = os.getcwd()

    async def __aenter__(self) -> LocalSession:
        from contextlib import AsyncExitStack

        from fermix_core.home import FermixHome

        self._stack = AsyncExitStack()
        home = FermixHome.resolve()
        self.client = None
        self.embedded = None
        self._poller = None
        if home.daemon_sock.exists():
            from fermix_core.daemon.client import DaemonClient, DaemonUnavailable

            try:
                self.client = await self._stack.enter_async_context(DaemonClient(home.daemon_sock))
            except DaemonUnavailable:
                self.client = None
        if self.client is None:
            from fermix_core.api import Fermix

            self.embedded = await self._stack.enter_async_context(Fermix.open())
        from fermix_core import startup

        startup.booted()  # everything loaded so far lives as long as the process
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.embedded is not None:
            if exc_info[0] is None:
                await self._finish_post_reply()
            self._warn_unfinished_background()
        await self._stack.aclose()

    async def _finish_post_reply(self) -> None:
        """Without a daemon, nothing runs after this process: finish the post-reply work
        (memory review, compaction) the turns scheduled, bounded, saying so if it is slow."""
        import anyio

        runner = self.embedded.service.runner
        if not runner.post_reply_pending:
            return
        with anyio.move_on_after(POST_REPLY_NOTICE_SECONDS):
            await runner.post_reply_drained()
            return
        sys.stderr.write(
            "finishing post-reply work (memory review, compaction) before exiting — at most "
            f"{POST_REPLY_LIMIT_SECONDS:g} s; Ctrl-C skips it\n"
        )
        sys.stderr.flush()
        with anyio.move_on_after(POST_REPLY_LIMIT_SECONDS - POST_REPLY_NOTICE_SECONDS):
            await runner.post_reply_drained()
            return
        sys.stderr.write(
            "post-reply work did not finish and was stopped; it is tried again after the "
            "next turn (a running daemon does it in the background)\n"
        )

    def _warn_unfinished_background(self) -> None:
        from fermix_core.channel import ConversationKey
        from fermix_core.service import CLI_CHANNEL

        runner = self.embedded.service.runner
        key = ConversationKey(CLI_CHANNEL, self.session, None)
        running = [t["id"] for t in runner.background_tasks(key) if t.get("status") == "running"]
        if running:
            sys.stderr.write(
                f"background work {', '.join(running)} stops here: without a daemon it ends "
                "with this process. Start one (`fermix start`) for background work that posts "
                "its result when it finishes.\n"
            )

    async def late(self, wait: float) -> list[str]:
        """Results that arrived after their request was answered (``/background``)."""
        if self.client is None:
            return await self.embedded.service.inbox.take(self.session, wait=wait)
        from fermix_core.daemon.client import DaemonClient
        from fermix_core.home import FermixHome

        if self._poller is None:
            # Its own connection: the request connection answers one call at a time.
            home = FermixHome.resolve()
            self._poller = await self._stack.enter_async_context(DaemonClient(home.daemon_sock))
        answer = await self._poller.call("inbox", {"session": self.session, "wait": wait})
        return list(answer.get("messages") or [])

    async def ask(self, text: str, images: Sequence[str] = ()) -> dict[str, Any]:
        """One turn; *images* are absolute paths of local image files (already checked)."""
        if self.client is not None:
            params: dict[str, Any] = {"text": text, "session": self.session, "cwd": self.cwd}
            if images:
                params["images"] = list(images)  # same machine, same user: the daemon reads them
            return await self.client.call("ask", params)
        if images:
            outcome = await self.embedded.ask(
                text, session=self.session, cwd=self.cwd, images=images
            )
        else:
            outcome = await self.embedded.ask(text, session=self.session, cwd=self.cwd)
        return outcome.as_dict()


class Thinking:
    """A "thinking…" spinner on stderr while the model works, only when stderr is a terminal.

    The first frame is drawn on entry and the line is wiped on exit, so nothing of it is
    left in the scrollback; piped or ``--json`` output never sees it.
    """

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    INTERVAL = 0.1  # seconds between frames: an animation timer, not a synchronisation

    def __init__(self, enabled: bool | None = None, stream: Any = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = _is_tty(self.stream) if enabled is None else enabled and _is_tty(self.stream)
        self._thread: Any = None

    def __enter__(self) -> Thinking:
        if self.enabled:
            import threading

            self._stop = threading.Event()
            self._draw(0)
            self._thread = threading.Thread(target=self._spin, name="fermix-thinking", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _draw(self, frame: int) -> None:
        self.stream.write(f"\r{self.FRAMES[frame % len(self.FRAMES)]} thinking…")
        self.stream.flush()

    def _spin(self) -> None:
        frame = 1
        while not self._stop.wait(self.INTERVAL):
            self._draw(frame)
            frame += 1


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def run_turns(coro_fn: Any, *, thinking: bool = False) -> Any:
    """Run *coro_fn* on a fresh event loop; an invalid config is printed, not raised.

    *thinking* shows the spinner (on a terminal) until the loop returns.
    """
    import anyio

    from fermix_core.cli.errors import user_error
    from fermix_core.config import ConfigError

    try:
        with Thinking(enabled=thinking):
            return anyio.run(coro_fn)
    except ConfigError as exc:
        sys.stderr.write(f"config.toml is not valid — fix it, then retry:\n{exc}\n")
        raise TurnsFailed(1) from exc
    except Exception as exc:
        message = user_error(exc)
        if message is None:
            raise
        sys.stderr.write(f"fermix: {message}\n")
        raise TurnsFailed(1) from exc


def check_images(paths: Sequence[str]) -> list[str] | None:
    """*paths* as absolute paths once each is a readable picture; ``None`` after printing why
    one is not (the caller exits 2). Only reads the first bytes of each file."""
    from fermix_core.media.images import ImageError, check_local_image

    checked: list[str] = []
    for path in paths:
        try:
            check_local_image(path)
        except ImageError as exc:
            sys.stderr.write(f"fermix ask: --image {path}: {exc}\n")
            return None
        checked.append(os.path.abspath(path))
    return checked


def ask_command(
    prompt: str, *, session: str, stdin: bool, as_json: bool, images: Sequence[str] = ()
) -> int:
    """One turn: print the reply (or one JSON object) and return the exit code."""
    text = prompt
    if stdin:
        piped = sys.stdin.read()
        text = f"{prompt}\n\n{piped}".strip() if prompt else piped.strip()
    if not text.strip() and not images:
        sys.stderr.write("nothing to ask: give a prompt, an --image, or pipe one with --stdin\n")
        return 2
    checked: list[str] = []
    if images:
        found = check_images(images)
        if found is None:
            return 2
        checked = found

    in_process = False

    async def main() -> dict[str, Any]:
        nonlocal in_process
        async with LocalSession(session) as local:
            in_process = local.client is None
            return await local.ask(text, checked)

    try:
        result = run_turns(main, thinking=not as_json)
    except TurnsFailed as exc:
        return exc.code
    if in_process and "/confirm " in str(result.get("reply", "")):
        # The pending token lives in the process that issued it, and this one ends now.
        sys.stderr.write(
            "this fermix ask ran without a daemon, so that /confirm token ends with it: run "
            "`fermix grant path PATH` to allow the folder, then ask again — or start the "
            "daemon (`fermix start`) and /confirm there.\n"
        )
    if as_json:
        from fermix_core.cli.output import print_json

        print_json(result)
    else:
        sys.stdout.write(f"{result.get('reply', '')}\n")
    sys.stdout.flush()
    return 1 if result.get("status") in ("error", "no_provider") else 0


def parse_ask_args(args: Sequence[str]) -> dict[str, Any] | None:
    """``ask``'s own arguments as keywords for :func:`ask_command`, or ``None`` when they
    need the full CLI (``--help``, an unknown option, a second prompt, a missing value)."""
    options: dict[str, Any] = {
        "prompt": "",
        "session": "default",
        "stdin": False,
        "as_json": False,
        "images": [],
    }
    prompt: str | None = None
    items = list(args)
    only_positional = False
    while items:
        item = items.pop(0)
        if only_positional or not item.startswith("-") or item == "-":
            if prompt is not None:
                return None
            prompt = item
        elif item == "--":
            only_positional = True
        elif item in ("--session", "-s"):
            if not items:
                return None
            options["session"] = items.pop(0)
        elif item.startswith("--session="):
            options["session"] = item.partition("=")[2]
        elif item == "--image":
            if not items:
                return None
            options["images"].append(items.pop(0))
        elif item.startswith("--image="):
            options["images"].append(item.partition("=")[2])
        elif item == "--stdin":
            options["stdin"] = True
        elif item == "--json":
            options["as_json"] = True
        else:
            return None
    if prompt is not None:
        options["prompt"] = prompt
    return options
