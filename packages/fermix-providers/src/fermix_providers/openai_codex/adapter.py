"""The ``openai_codex`` provider: GPT models through a ChatGPT subscription.

The Codex backend (``https://chatgpt.com/backend-api/codex``, ``POST /responses``) speaks
the Responses wire with a few conditions of its own, as the public Codex CLI uses it:

* it only streams, so every call is an SSE stream — which is also what makes this the
  adapter that can *prove* a timeout was pre-response (zero chunks counted);
* nothing is stored server-side (``store: false``) and ``instructions`` is always present;
* the OAuth bearer comes with ``ChatGPT-Account-Id`` (the account the login belongs to),
  ``OpenAI-Beta: responses=experimental`` and an ``originator`` naming the client.

``fast = true`` sends ``service_tier: "priority"``: the backend's faster tier is the
Platform's priority processing under another name, and "priority" is the value the Codex
CLI itself sends for its fast mode ("fast" is not a service tier the API knows).
"""

from __future__ import annotations

from typing import Any

from fermix_core.provider import ChatRequest, ProviderSettings
from fermix_core.specs import ProviderSpec

from fermix_providers.wires.responses import OAuthBearer, ResponsesProvider, token_source

__all__ = ["ORIGINATOR", "CodexProvider"]

#: Identifies this client to the backend, as each Codex client does.
ORIGINATOR = "fermix"
#: The JWT claim holding the ChatGPT account of an OpenAI access token.
_AUTH_CLAIM = "https://api.openai.com/auth"


class CodexProvider(ResponsesProvider):
    """ChatGPT-subscription Codex access; OAuth only, always streamed."""

    always_stream = True
    reasoning_summary = "auto"
    send_empty_instructions = True

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        super().__init__(spec, settings)
        self.oauth = OAuthBearer(token_source(settings, spec.name), provider=spec.name)

    def build_body(self, request: ChatRequest, model: str, *, stream: bool) -> dict[str, Any]:
        body = super().build_body(request, model, stream=True)
        body["store"] = False
        if self.settings.fast:
            body["service_tier"] = "priority"
        return body

    def headers(self) -> dict[str, str]:
        headers = super().headers()
        headers["accept"] = "text/event-stream"
        headers["openai-beta"] = "responses=experimental"
        headers["originator"] = ORIGINATOR
        account = self._account_id()
        if account:
            headers["chatgpt-account-id"] = account
        return headers

    def _account_id(self) -> str | None:
        """The login's account: stored with the profile, else read from the token's claims."""
        source = self.oauth.source if self.oauth is not None else None
        stored = getattr(source, "account_id", None)
        if isinstance(stored, str) and stored:
            return stored
        from fermix_providers.oauth.tokens import jwt_claims

        token = self.oauth.current() if self.oauth is not None else None
        claim = jwt_claims(token).get(_AUTH_CLAIM)
        account = claim.get("chatgpt_account_id") if isinstance(claim, dict) else None
        return account if isinstance(account, str) and account else None
