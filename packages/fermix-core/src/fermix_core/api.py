"""Embedding Fermix in another Python application.

Example::

    import anyio
    from fermix_core.api import Fermix

    async def main():
        async with Fermix.open(home="/tmp/fermix-demo") as fx:
            reply = await fx.ask("What can you do?", session="demo")
            print(reply.text)

    anyio.run(main)

The embedded runtime is the same one the daemon runs — plugins, config validation,
routing, the gateway, the queue and the conversation store — without the control socket
or remote channels. ``docs/embedding.md`` has the details.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fermix_core.facade import ServiceHost
from fermix_core.home import FermixHome
from fermix_core.runtime import Runtime
from fermix_core.service import FermixService
from fermix_core.turns import TurnOutcome

__all__ = ["Fermix", "FermixClosedError", "TurnOutcome"]


class FermixClosedError(RuntimeError):
    """The :class:`Fermix` was used after its ``async with Fermix.open(...)`` block ended."""


class Fermix:
    """A running, embedded Fermix. Build it with :meth:`open`."""

    def __init__(self, service: FermixService) -> None:
        self.service = service
        self.closed = False

    @property
    def runtime(self) -> Runtime:
        return self.service.runtime

    @property
    def host(self) -> ServiceHost:
        """The runtime facade plugins get (gateway ingest, reply ports, tasks, secrets)."""
        return self.service.runtime.service_host

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        home: str | Path | FermixHome | None = None,
        *,
        config: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        plugins: Iterable[tuple[str, Any]] = (),
        entry_points: bool = True,
    ) -> AsyncIterator[Fermix]:
        """Boot (validating config), start plugins, and stop everything on exit.

        *home* defaults to ``FERMIX_HOME``/``~/.fermix``; *config* replaces config.toml with a
        mapping of the same shape; *plugins* are ``(name, object)`` pairs registered in
        process; ``entry_points=False`` loads no installed plugins (only core and *plugins*).
        """
        if home is not None and not isinstance(home, FermixHome):
            home = FermixHome(Path(home).expanduser().resolve())
        runtime = Runtime.boot(
            home, environ=environ, plugins=plugins, entry_points=entry_points, config=config
        )
        async with FermixService.running(runtime) as service:
            fx = cls(service)
            try:
                async with runtime.serving(service):
                    yield fx
            finally:
                fx.closed = True

    async def ask(
        self,
        text: str = "",
        *,
        session: str = "default",
        cwd: str | Path | None = None,
        images: Iterable[str | os.PathLike[str] | bytes] = (),
    ) -> TurnOutcome:
        """Run one operator turn (or slash command) in *session*; returns the outcome.

        *images* are local image files (paths) or image bytes the model sees with *text*;
        a path that is missing, unreadable or not a picture raises
        :class:`~fermix_core.media.images.ImageError` (a ``ValueError``) before any turn.
        Raises :class:`FermixClosedError` once the ``Fermix.open`` block has ended.
        """
        if self.closed:
            raise FermixClosedError(
                "this Fermix is closed: its `async with Fermix.open(...)` block has ended. "
                "Call ask() inside the block, or open a new one."
            )
        pictures: list[Path | bytes] = []
        for image in images:
            if isinstance(image, bytes | bytearray):
                pictures.append(bytes(image))
                continue
            from fermix_core.media.images import check_local_image

            check_local_image(image)
            pictures.append(Path(image).absolute())
        cwd_path = Path(cwd) if cwd else None
        if pictures:
            return await self.service.ask(text, session=session, cwd=cwd_path, images=pictures)
        return await self.service.ask(text, session=session, cwd=cwd_path)

    def status(self) -> dict[str, Any]:
        return self.service.status()
