"""Tool wire definitions kept on disk, so a new process sends them without building tools.

A tool's wire definition is its name, its description and the JSON schema of its argument
model. Producing it means importing the tool's module (and everything that module
imports) and letting pydantic build the model and its schema: tens of milliseconds and
several megabytes for the tools a turn sends, paid again by every cold ``fermix ask``.
The result depends only on the spec and on the code, so it is kept in
``$FERMIX_HOME/cache/tool-definitions.json`` and reused while neither changed — the same
reasoning Python's bytecode cache follows.

What a cached entry is keyed on (all of it must match, else the tool is built as usual):

* the spec's full ``repr`` (name, description, factory and argument-model references,
  policy, …); a spec that references a callable instead of an import path is not cached;
* a stamp of the code: path, size and modification time of every ``.py`` file of the
  top-level packages the factory and the argument model live in, and of ``fermix_core``
  (the base ``Tool.definition`` and shared field types);
* the Python and pydantic versions.

A cache file that is missing, unreadable or of another format is ignored and rewritten.
Only tools built from specs go through here; run-time tools (MCP) never do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fermix_core.derived_cache import code_key
from fermix_core.messages import ToolDefinition
from fermix_core.specs import ToolSpec

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.home import FermixHome

FORMAT = 1
FILE_NAME = "tool-definitions.json"


def spec_key(spec: ToolSpec) -> str | None:
    """The cache key of *spec*'s definition, or ``None`` when it cannot be cached."""
    refs = [spec.factory, spec.args_model]
    if any(ref is not None and not isinstance(ref, str) for ref in refs) or spec.factory is None:
        return None
    text = repr(spec)
    if " at 0x" in text:  # an object without a stable repr somewhere in the spec
        return None
    tops = {ref.split(":")[0].split(".")[0] for ref in refs if ref}
    return code_key(text, tops)


class DefinitionCache:
    """The on-disk cache of spec-built tool definitions for one ``FERMIX_HOME``.

    Read once when first consulted; :meth:`save` writes it back when an entry was added or
    replaced, dropping tools that are no longer registered.
    """

    def __init__(self, home: FermixHome) -> None:
        from fermix_core.derived_cache import DerivedCache

        self._cache = DerivedCache(home, FILE_NAME, FORMAT)
        self.path = self._cache.path

    def get(self, spec: ToolSpec) -> ToolDefinition | None:
        """The cached definition of *spec*, if its key still matches."""
        key = spec_key(spec)
        stored = self._cache.get(spec.name, key) if key is not None else None
        if stored is None:
            return None
        try:
            return ToolDefinition.model_validate(stored)
        except ValueError:
            return None

    def put(self, spec: ToolSpec, definition: ToolDefinition) -> None:
        key = spec_key(spec)
        if key is not None:
            self._cache.put(spec.name, key, definition.model_dump(mode="json"))

    def save(self, registered: set[str] | None = None) -> None:
        """Write the cache if it changed; *registered* names the tools to keep."""
        self._cache.save(registered)
