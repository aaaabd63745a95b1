"""First-party Fermix channels.

One registration module per channel (``fermix_channels.<name>.plugin``), each exposed
through its own ``fermix`` entry point. Registration modules import neither pydantic nor any
platform SDK: their specs name the config model (``fermix_channels.<name>.config``) and the
adapter by import path, resolved only when the channel is configured or started.
"""

__version__ = "0.1.0"
