"""The gateway: trust, the per-conversation queue, reply ports and the inbound pipeline.

Names are resolved on first use, so that reading one small piece (a doctor check asking a
:class:`TrustPolicy` for its startup problem) does not import the whole pipeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fermix_core.lazyexports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.gateway.gateway import Gateway as Gateway
    from fermix_core.gateway.gateway import needs_transcription as needs_transcription
    from fermix_core.gateway.queue import ConversationQueue as ConversationQueue
    from fermix_core.gateway.queue import QueueClosedError as QueueClosedError
    from fermix_core.gateway.queue import QueueLoad as QueueLoad
    from fermix_core.gateway.reply import ChannelReplyPort as ChannelReplyPort
    from fermix_core.gateway.reply import features_of as features_of
    from fermix_core.gateway.reply import reply_text as reply_text
    from fermix_core.gateway.reply import try_reply_text as try_reply_text
    from fermix_core.gateway.trust import TrustPolicy as TrustPolicy
    from fermix_core.gateway.trust import TrustPolicyError as TrustPolicyError
    from fermix_core.gateway.types import ChannelFeatures as ChannelFeatures
    from fermix_core.gateway.types import CommandServices as CommandServices
    from fermix_core.gateway.types import IngestOutcome as IngestOutcome
    from fermix_core.gateway.types import IngestStatus as IngestStatus
    from fermix_core.gateway.types import ReplyPort as ReplyPort
    from fermix_core.gateway.types import StopReport as StopReport
    from fermix_core.gateway.types import TurnExecutor as TurnExecutor
    from fermix_core.gateway.types import TurnJob as TurnJob

_LAZY = {
    "Gateway": "gateway",
    "needs_transcription": "gateway",
    "ConversationQueue": "queue",
    "QueueClosedError": "queue",
    "QueueLoad": "queue",
    "ChannelReplyPort": "reply",
    "features_of": "reply",
    "reply_text": "reply",
    "try_reply_text": "reply",
    "TrustPolicy": "trust",
    "TrustPolicyError": "trust",
    "ChannelFeatures": "types",
    "CommandServices": "types",
    "IngestOutcome": "types",
    "IngestStatus": "types",
    "ReplyPort": "types",
    "StopReport": "types",
    "TurnExecutor": "types",
    "TurnJob": "types",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
