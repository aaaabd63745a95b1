"""The daemon's ``skills.*`` control methods: what ``fermix skills`` calls over the socket.

``skills.reload`` re-scans the running daemon's registry in place, so the next turn (and
every job run) sees the change without a restart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fermix_core.skills.package import SkillError

__all__ = ["control_handlers", "view_payload"]

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def view_payload(skills: Any, name: str, file: str | None) -> dict[str, Any]:
    skill = skills.require(name)
    if file:
        return {"name": skill.name, "file": file, "text": skill.read_reference(file)}
    return {**skill.summary(), "extra": dict(skill.extra), "body": skill.body}


def control_handlers(registry: Callable[[], Any], error: type[Exception]) -> dict[str, Handler]:
    """``{method: handler}``; *error* is the server's ``MethodError(code, message)``."""
    import anyio.to_thread

    def skills() -> Any:
        current = registry()
        if current is None:
            raise error("unavailable", "skills are not loaded in this daemon")
        return current

    async def list_(params: dict[str, Any]) -> dict[str, Any]:
        return skills().listing()

    async def view(params: dict[str, Any]) -> dict[str, Any]:
        name, file = params.get("name"), params.get("file")
        if not isinstance(name, str) or not name:
            raise error("bad_params", "name must be a non-empty string")
        try:
            return await anyio.to_thread.run_sync(view_payload, skills(), name, file)
        except SkillError as exc:
            raise error("skill_error", str(exc)) from None

    async def reload(params: dict[str, Any]) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(skills().reload)

    return {"skills.list": list_, "skills.view": view, "skills.reload": reload}
