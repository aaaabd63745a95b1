"""Request signatures: slack_sdk's signer on one side, our verifier on the other."""

from __future__ import annotations

import sys
import time

import pytest
from fermix_channels.slack.verify import MAX_AGE_SECONDS, SignatureError, SlackVerifier

#: The loopback Slack helpers, loaded by conftest.py.
fs = sys.modules["fermix_channels_tests_fake_slack"]

BODY = b'{"type":"event_callback","event":{"type":"message","text":"hi"}}'


def verifier(now: float | None = None) -> SlackVerifier:
    return SlackVerifier(fs.SIGNING_SECRET, now=(lambda: now) if now is not None else time.time)


def test_a_request_signed_by_slack_sdk_passes() -> None:
    verifier().verify(fs.sign(BODY), BODY)


def test_the_sdk_signer_matches_slacks_documented_recipe() -> None:
    headers = fs.sign(BODY, timestamp=1_700_000_000)
    assert headers["x-slack-signature"] == fs.manual_signature(BODY, "1700000000")
    verifier(now=1_700_000_010).verify(headers, BODY)


@pytest.mark.parametrize("missing", ["x-slack-signature", "x-slack-request-timestamp"])
def test_a_missing_header_is_refused(missing: str) -> None:
    headers = fs.sign(BODY)
    del headers[missing]
    with pytest.raises(SignatureError, match="missing"):
        verifier().verify(headers, BODY)


@pytest.mark.parametrize("stamp", ["", "abc", "1e9", "-5", "12345678901234567", "١٢٣"])
def test_a_malformed_timestamp_is_refused(stamp: str) -> None:
    headers = {**fs.sign(BODY), "x-slack-request-timestamp": stamp}
    with pytest.raises(SignatureError):
        verifier().verify(headers, BODY)


@pytest.mark.parametrize("age", [MAX_AGE_SECONDS + 1, -(MAX_AGE_SECONDS + 1), 86_400])
def test_a_stale_or_future_request_is_refused_even_when_signed(age: int) -> None:
    now = 1_700_000_000
    headers = fs.sign(BODY, timestamp=now - age)
    with pytest.raises(SignatureError, match="clock"):
        verifier(now=now).verify(headers, BODY)


def test_a_request_at_the_edge_of_the_window_passes() -> None:
    now = 1_700_000_000
    verifier(now=now).verify(fs.sign(BODY, timestamp=now - MAX_AGE_SECONDS), BODY)


def test_a_tampered_body_is_refused() -> None:
    headers = fs.sign(BODY)
    with pytest.raises(SignatureError, match="does not match"):
        verifier().verify(headers, BODY.replace(b"hi", b"ho"))


def test_another_secret_is_refused() -> None:
    headers = fs.sign(BODY, secret="not-the-signing-secret")
    with pytest.raises(SignatureError, match="does not match"):
        verifier().verify(headers, BODY)


@pytest.mark.parametrize("signature", ["v1=abc", "sha256=abc", "v0=", "v0=zz"])
def test_a_foreign_or_truncated_signature_is_refused(signature: str) -> None:
    headers = {**fs.sign(BODY), "x-slack-signature": signature}
    with pytest.raises(SignatureError):
        verifier().verify(headers, BODY)


def test_refusals_never_name_the_secret() -> None:
    headers = fs.sign(BODY, secret="wrong")
    with pytest.raises(SignatureError) as caught:
        verifier().verify(headers, BODY)
    assert fs.SIGNING_SECRET not in str(caught.value)


def test_an_empty_secret_cannot_build_a_verifier() -> None:
    with pytest.raises(ValueError, match="empty"):
        SlackVerifier("  ")
