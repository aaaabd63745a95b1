"""The configuration system: models, validation against plugins, env overlay, writes.

Plugin authors need one name from here: :data:`Secret`, the annotated type that marks a
field of their section model as a secret slot::

    from pydantic import BaseModel, ConfigDict
    from fermix_core.config import Secret

    class WeatherConfig(BaseModel):
        model_config = ConfigDict(extra="forbid")
        api_key: Secret | None = None
        units: Literal["metric", "imperial"] = "metric"

Names resolve lazily so that ``import fermix_core.config`` for the early, pydantic-free
:func:`plugins_disabled` read does not pay for pydantic and every model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fermix_core.lazyexports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.config.document import (
        format_key as format_key,
    )
    from fermix_core.config.document import (
        parse_key as parse_key,
    )
    from fermix_core.config.document import (
        plugins_disabled as plugins_disabled,
    )
    from fermix_core.config.document import (
        read_document as read_document,
    )
    from fermix_core.config.env import CORE_FLAGS as CORE_FLAGS
    from fermix_core.config.env import EnvOverlay as EnvOverlay
    from fermix_core.config.env import env_overlays as env_overlays
    from fermix_core.config.errors import ConfigError as ConfigError
    from fermix_core.config.errors import ConfigKeyError as ConfigKeyError
    from fermix_core.config.errors import ConfigProblem as ConfigProblem
    from fermix_core.config.loader import LoadedConfig as LoadedConfig
    from fermix_core.config.loader import ValidationReport as ValidationReport
    from fermix_core.config.loader import check_config as check_config
    from fermix_core.config.loader import load_config as load_config
    from fermix_core.config.models import CoreConfig as CoreConfig
    from fermix_core.config.models import FermixConfig as FermixConfig
    from fermix_core.config.models import McpServer as McpServer
    from fermix_core.config.models import ProviderConfig as ProviderConfig
    from fermix_core.config.models import SandboxConfig as SandboxConfig
    from fermix_core.config.secret import KEYRING as KEYRING
    from fermix_core.config.secret import CommandSecret as CommandSecret
    from fermix_core.config.secret import EnvSecret as EnvSecret
    from fermix_core.config.secret import Secret as Secret
    from fermix_core.config.secret import SecretField as SecretField
    from fermix_core.config.secret import is_secret_annotation as is_secret_annotation
    from fermix_core.config.slots import NEVER_FROM_ENV as NEVER_FROM_ENV
    from fermix_core.config.slots import secret_fields as secret_fields
    from fermix_core.config.writer import ConfigChange as ConfigChange
    from fermix_core.config.writer import get_value as get_value
    from fermix_core.config.writer import render_config as render_config
    from fermix_core.config.writer import set_value as set_value
    from fermix_core.config.writer import unset_value as unset_value
    from fermix_core.config.writer import write_document as write_document

_LAZY: dict[str, str] = {
    "format_key": "document",
    "parse_key": "document",
    "plugins_disabled": "document",
    "read_document": "document",
    "CORE_FLAGS": "env",
    "EnvOverlay": "env",
    "env_overlays": "env",
    "ConfigError": "errors",
    "ConfigKeyError": "errors",
    "ConfigProblem": "errors",
    "LoadedConfig": "loader",
    "ValidationReport": "loader",
    "check_config": "loader",
    "load_config": "loader",
    "CoreConfig": "models",
    "FermixConfig": "models",
    "McpServer": "models",
    "ProviderConfig": "models",
    "SandboxConfig": "models",
    "KEYRING": "secret",
    "CommandSecret": "secret",
    "EnvSecret": "secret",
    "Secret": "secret",
    "SecretField": "secret",
    "is_secret_annotation": "secret",
    "NEVER_FROM_ENV": "slots",
    "secret_fields": "slots",
    "ConfigChange": "writer",
    "get_value": "writer",
    "render_config": "writer",
    "set_value": "writer",
    "unset_value": "writer",
    "write_document": "writer",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_exports(__name__, _LAZY, globals())
