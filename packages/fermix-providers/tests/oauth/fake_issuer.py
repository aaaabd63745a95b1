"""A fake OAuth issuer on a real loopback socket, strict where real issuers are strict.

Loaded by path (see ``load_fake_issuer`` in the tests), since test directories are not
packages.

It runs in its own thread (stdlib ``ThreadingHTTPServer``) so synchronous CLI tests and async
tests can both talk to it. It checks what a real authorization server checks — the PKCE
verifier against the challenge, the redirect URI, the client id, single-use codes — and it
rotates refresh tokens and treats a second use of a rotated one as theft: the request is
refused and the whole token family is revoked.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

CLIENT_IDS = {
    "app_EMoamEEZ73f0CkXaXp7hrann",  # Codex
    "b1a00492-073a-47ea-816f-4c329264a828",  # xAI
    "9d1c250a-e61b-44d9-88ed-5944d1962f5e",  # Anthropic
}


def make_jwt(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        raw = json.dumps(data).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


@dataclass
class FakeIssuer:
    authorize_path: str = "/oauth/authorize"
    token_path: str = "/oauth/token"
    expires_in: int = 3600
    account_id: str = "acct-123"
    email: str = "owner@example.com"
    #: Answer the authorize request with ``error=access_denied``.
    deny: bool = False
    #: Redirect with a state that is not the one the client sent.
    wrong_state: bool = False
    #: Status for ``GET /v1/models`` (the xAI access check).
    models_status: int = 200
    #: When set, refresh requests wait for :attr:`gate` before answering.
    hold_refresh: bool = False
    gate: threading.Event = field(default_factory=threading.Event)
    # --- what happened
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    token_content_types: list[str] = field(default_factory=list)
    models_auth: list[str] = field(default_factory=list)
    refresh_calls: int = 0
    reuse_detected: int = 0
    # --- state
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    live_refresh: set[str] = field(default_factory=set)
    spent_refresh: set[str] = field(default_factory=set)
    live_access: set[str] = field(default_factory=set)
    _counter: Any = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    # ------------------------------------------------------------------ helpers for tests

    def issue_refresh_token(self) -> str:
        """A live refresh token, as if from an earlier login."""
        with self._lock:
            token = f"rt-seed-{next(self._counter)}"
            self.live_refresh.add(token)
            return token

    # ------------------------------------------------------------------ endpoints

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        self.authorize_requests.append(query)
        redirect = query.get("redirect_uri", "")
        target = urlsplit(redirect)
        problems = []
        if query.get("response_type") != "code":
            problems.append("response_type")
        if query.get("client_id") not in CLIENT_IDS:
            problems.append("client_id")
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            problems.append("pkce")
        if target.scheme != "http" or target.hostname not in ("127.0.0.1", "localhost"):
            problems.append("redirect_uri")
        if problems:
            return 400, {}, json.dumps({"error": "invalid_request", "bad": problems}).encode()
        state = "forged-state" if self.wrong_state else query.get("state", "")
        if self.deny:
            params = {"error": "access_denied", "error_description": "user said no", "state": state}
        else:
            code = f"code-{next(self._counter)}"
            self.codes[code] = {
                "challenge": query["code_challenge"],
                "redirect_uri": redirect,
                "client_id": query["client_id"],
            }
            params = {"code": code, "state": state}
        return 302, {"Location": f"{redirect}?{urlencode(params)}"}, b""

    def token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        self.token_requests.append(form)
        grant = form.get("grant_type")
        if form.get("client_id") not in CLIENT_IDS:
            return 401, {"error": "invalid_client"}
        if grant == "authorization_code":
            return self._code_grant(form)
        if grant == "refresh_token":
            with self._lock:
                self.refresh_calls += 1
            if self.hold_refresh:
                self.gate.wait(timeout=30)
            return self._refresh_grant(form)
        return 400, {"error": "unsupported_grant_type"}

    def _code_grant(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        record = self.codes.pop(form.get("code", ""), None)
        if record is None:
            return 400, {"error": "invalid_grant", "error_description": "unknown or used code"}
        verifier = form.get("code_verifier", "")
        digest = hashlib.sha256(verifier.encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if challenge != record["challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
        if form.get("redirect_uri") != record["redirect_uri"]:
            return 400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"}
        if form.get("client_id") != record["client_id"]:
            return 400, {"error": "invalid_grant", "error_description": "client mismatch"}
        return 200, self._tokens()

    def _refresh_grant(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        token = form.get("refresh_token", "")
        with self._lock:
            if token in self.spent_refresh:
                # Reuse of a rotated token: revoke everything issued in this family.
                self.reuse_detected += 1
                self.live_refresh.clear()
                self.live_access.clear()
                return 400, {
                    "error": "invalid_grant",
                    "error_description": "refresh token already used",
                }
            if token not in self.live_refresh:
                return 400, {"error": "invalid_grant", "error_description": "unknown token"}
            self.live_refresh.discard(token)
            self.spent_refresh.add(token)
        return 200, self._tokens()

    def _tokens(self) -> dict[str, Any]:
        n = next(self._counter)
        access = f"at-{n}"
        refresh = f"rt-{n}"
        with self._lock:
            self.live_access.add(access)
            self.live_refresh.add(refresh)
        id_token = make_jwt(
            {
                "sub": "user-1",
                "email": self.email,
                "exp": int(time.time()) + self.expires_in,
                "https://api.openai.com/auth": {"chatgpt_account_id": self.account_id},
            }
        )
        return {
            "access_token": access,
            "refresh_token": refresh,
            "id_token": id_token,
            "expires_in": self.expires_in,
            "token_type": "Bearer",
            "scope": "openid offline_access",
        }


def _handler(issuer: FakeIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            return

        def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path == issuer.authorize_path:
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                self._send(*issuer.authorize(query))
            elif parts.path.endswith("/models"):
                issuer.models_auth.append(self.headers.get("authorization", ""))
                status = issuer.models_status
                body = {"data": []} if status == 200 else {"error": "no api access"}
                self._send(status, {"Content-Type": "application/json"}, json.dumps(body).encode())
            else:
                self._send(404, {}, b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length).decode()
            kind = self.headers.get("content-type", "")
            issuer.token_content_types.append(kind)
            if urlsplit(self.path).path != issuer.token_path:
                self._send(404, {}, b"")
                return
            if kind.startswith("application/json"):
                form = json.loads(raw)
            else:
                form = {k: v[0] for k, v in parse_qs(raw).items()}
            status, body = issuer.token(form)
            self._send(status, {"Content-Type": "application/json"}, json.dumps(body).encode())

    return Handler


@contextlib.contextmanager
def running(issuer: FakeIssuer | None = None) -> Iterator[FakeIssuer]:
    """Serve *issuer* on 127.0.0.1 in a thread for the duration of the block."""
    issuer = issuer or FakeIssuer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(issuer))
    server.daemon_threads = True
    issuer.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        issuer.gate.set()
        server.shutdown()
        server.server_close()
        thread.join()
