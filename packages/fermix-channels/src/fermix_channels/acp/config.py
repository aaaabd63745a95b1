"""``[fermix_channels.acp]``.

The ACP surface authorizes by the socket it binds — only the account running the daemon
can open it — so it has no owner id, no allowlist and no slash commands, and those keys are
rejected here rather than accepted and ignored. Replies always stream to the ACP client, so
there is no ``streaming`` key either.
"""

from __future__ import annotations

from pydantic import Field

from fermix_channels.config import ChannelConfig


class AcpConfig(ChannelConfig):
    channel = "acp"

    enabled: bool = Field(
        default=True,
        description="Serve ACP clients (fermix acp) on the local socket. On by default.",
    )
