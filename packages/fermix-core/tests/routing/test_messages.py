"""Friendly replies for failed turns: usage limits, outages, rejected keys, full contexts."""

from __future__ import annotations

import pytest
from fermix_core.provider import ErrorKind, ProviderError
from fermix_core.routing import NoProviderConfigured, RouteConfigError
from fermix_core.routing.messages import format_wait, user_message


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "~1 min"),
        (1, "~1 min"),
        (59.9, "~1 min"),
        (60, "~1 min"),
        (61, "~2 min"),
        (300, "~5 min"),
        (89 * 60, "~89 min"),
        (89 * 60 + 1, "~2 hours"),  # rounds up to 90 min, which is shown in hours
        (90 * 60, "~2 hours"),
        (3 * 3600, "~3 hours"),
        (3 * 3600 + 1, "~4 hours"),
        (-5, "~1 min"),
    ],
)
def test_format_wait(seconds: float, expected: str) -> None:
    assert format_wait(seconds) == expected


@pytest.mark.parametrize("kind", [ErrorKind.RATE_LIMIT, ErrorKind.QUOTA])
def test_a_limit_with_a_reset_time_says_when(kind: ErrorKind) -> None:
    error = ProviderError(kind, "429 body", provider="openai", retry_after_seconds=250)
    text = user_message(error, label="OpenAI")
    assert "usage limit — try again in ~5 min" in text
    assert text.startswith("OpenAI")


def test_limits_without_a_reset_time_still_say_what_to_do() -> None:
    quota = user_message(ProviderError(ErrorKind.QUOTA, "x", provider="xai"), label="xAI Grok")
    assert "usage limit" in quota and "billing" in quota
    rate = user_message(ProviderError(ErrorKind.RATE_LIMIT, "x", provider="xai"))
    assert "xai" in rate and "try again" in rate


@pytest.mark.parametrize("kind", [ErrorKind.OVERLOADED, ErrorKind.SERVER_ERROR])
def test_an_outage_quotes_the_provider_verbatim(kind: ErrorKind) -> None:
    sentence = "Overloaded: our servers are experiencing high demand"
    text = user_message(ProviderError(kind, sentence, provider="anthropic"), label="Anthropic")
    assert text.startswith(f"Anthropic says: {sentence}")
    assert "provider-side" in text


def test_an_outage_without_a_sentence_still_blames_the_right_side() -> None:
    text = user_message(ProviderError(ErrorKind.OVERLOADED, "  ", provider="anthropic"))
    assert "provider-side" in text and "says" not in text


def test_a_rejected_key_names_the_provider_and_the_fix() -> None:
    text = user_message(ProviderError(ErrorKind.AUTH, "401", provider="mistral"), label="Mistral")
    assert text.startswith("The API key for Mistral was rejected — run `fermix setup`")


def test_a_rejected_oauth_login_points_at_auth_login() -> None:
    text = user_message(ProviderError(ErrorKind.OAUTH, "401", provider="xai"), label="xAI Grok")
    assert "fermix auth login --provider xai" in text


def test_context_length_suggests_compact_or_new() -> None:
    text = user_message(ProviderError(ErrorKind.CONTEXT_LENGTH, "too long", provider="openai"))
    assert "/compact" in text and "/new" in text


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_every_kind_gets_a_nonempty_sentence(kind: ErrorKind) -> None:
    text = user_message(ProviderError(kind, "detail", provider="p"), label="Provider P")
    # Unsupported input passes the adapter's sentence through, which may start with a model id.
    assert text[0].isupper() or kind is ErrorKind.UNSUPPORTED_INPUT
    assert text.rstrip()[-1] in ".!?)"


def test_unsupported_input_passes_the_adapters_guidance_through() -> None:
    message = "llama3.2 cannot read images; choose a vision-capable model or provider"
    text = user_message(ProviderError(ErrorKind.UNSUPPORTED_INPUT, message, provider="ollama"))
    assert text == message + "."


def test_routing_errors_become_sentences() -> None:
    assert user_message(NoProviderConfigured()) == "No provider configured — run `fermix setup`."
    assert user_message(RouteConfigError("bad pairing.")) == "Bad pairing."


def test_unexpected_exceptions_reveal_nothing() -> None:
    text = user_message(RuntimeError("token sk-abc123 leaked in a traceback"))
    assert "sk-abc123" not in text and "try again" in text


def test_provider_text_in_a_reply_is_redacted() -> None:
    import json
    from pathlib import Path

    from fermix_core import logs

    corpus = json.loads(
        (Path(__file__).parents[1] / "data" / "token_corpus.json").read_text("utf-8")
    )
    tokens = [entry["token"] for entry in corpus["positive"]]
    plain = "no-shape-key-4471"
    logs.add_known_secret(plain)
    try:
        for kind in (ErrorKind.SERVER_ERROR, ErrorKind.INVALID_REQUEST, ErrorKind.UNKNOWN):
            body = f"echo {plain} " + " ".join(tokens)
            text = user_message(ProviderError(kind, body, provider="openai"))
            assert plain not in text and not [t for t in tokens if t in text], kind
            assert "[REDACTED:secret]" in text
    finally:
        logs.forget_known_secrets()
