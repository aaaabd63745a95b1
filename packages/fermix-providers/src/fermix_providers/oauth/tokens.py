"""Access tokens for OAuth provider modes, refreshed on demand and never reused once rotated.

Adapters hold one :class:`TokenSource` per route and ask it for a bearer token before each
call (``await source.access_token()``), and for a fresh one after a 401
(``await source.refresh()``). Everything hard lives here rather than in each wire:

* The profile lives in ``auth.json`` (:class:`~fermix_core.authfile.AuthStore`), which
  ``fermix auth login`` may rewrite while the daemon runs. The source notices a replaced
  file by its inode/mtime/size signature — one ``stat`` per call instead of a read.
* Issuers rotate refresh tokens and treat a second use of a rotated one as theft, revoking
  the whole login. So concurrent refreshes in one process coalesce into a single grant, a
  sidecar ``flock`` serializes refreshes across processes, and every refresh re-reads the
  file first: when someone else already refreshed, their token is adopted instead of
  spending the (now dead) refresh token again.
* A token that expires within :data:`EXPIRY_SKEW_SECONDS` is refreshed before it is handed
  out, so a long request does not start with a token that dies in flight.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from fermix_core.authfile import AuthFileError, AuthStore
from fermix_core.provider import ErrorKind, ProviderError

try:  # POSIX; elsewhere in-process coalescing is all there is.
    import fcntl
except ImportError:  # pragma: no cover - platform specific
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "EXPIRY_SKEW_SECONDS",
    "PROFILE_PROVIDERS",
    "PROVIDER_PROFILES",
    "Refresher",
    "TokenGrant",
    "TokenSource",
    "jwt_claims",
]

log = logging.getLogger(__name__)

#: Provider name -> auth.json profile name.
PROVIDER_PROFILES: dict[str, str] = {
    "openai_codex": "codex",
    "xai": "xai_oauth",
    "anthropic": "anthropic_oauth",
}
#: auth.json profile name -> provider name (for "run `fermix auth login --provider X`").
PROFILE_PROVIDERS: dict[str, str] = {v: k for k, v in PROVIDER_PROFILES.items()}

#: Tokens this close to expiry are refreshed before use.
EXPIRY_SKEW_SECONDS = 60.0
#: How long a refresh waits for another process's refresh of the same file to finish.
CROSS_PROCESS_WAIT_SECONDS = 90.0
_LOCK_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class TokenGrant:
    """What a token endpoint returned, normalized (``expires_at`` is epoch seconds).

    ``refresh_token`` is ``None`` when the issuer did not rotate it; the stored one stays.
    """

    access_token: str
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    id_token: str | None = field(default=None, repr=False)
    account_id: str | None = None
    scope: str | None = None
    token_type: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # the dataclass repr would print the access token
        return (
            f"TokenGrant(access_token=<{len(self.access_token)} chars>, "
            f"rotated={self.refresh_token is not None}, expires_at={self.expires_at!r}, "
            f"account_id={self.account_id!r})"
        )

    def profile_changes(self) -> dict[str, Any]:
        """The auth.json fields this grant sets (absent values leave stored ones alone)."""
        changes: dict[str, Any] = {"access_token": self.access_token, **dict(self.extra)}
        for key in ("refresh_token", "expires_at", "id_token", "account_id", "scope"):
            value = getattr(self, key)
            if value is not None:
                changes[key] = value
        if self.token_type is not None:
            changes["token_type"] = self.token_type
        return changes


#: Turns the stored profile (it holds ``refresh_token``) into a new grant. Raises
#: :class:`ProviderError` — kind ``OAUTH`` when the issuer refused the refresh token,
#: a transport kind when the issuer could not be reached.
Refresher = Callable[[Mapping[str, Any]], Awaitable[TokenGrant]]


def jwt_claims(token: str | None) -> dict[str, Any]:
    """The unverified claims of a JWT, ``{}`` for anything that is not one.

    Only used to read facts the issuer put there for the client (expiry, account id); the
    signature is the resource server's business.
    """
    if not token or token.count(".") != 2:
        return {}
    payload = token.split(".")[1]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        claims = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    return claims if isinstance(claims, dict) else {}


class _Flight:
    """One refresh in progress that other callers in this process wait on."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.token: str | None = None
        self.error: ProviderError | None = None


_INFLIGHT: dict[tuple[str, str], _Flight] = {}


class TokenSource:
    """Bearer tokens for one auth.json profile (``codex``, ``xai_oauth``, ``anthropic_oauth``).

    *refresher* defaults to the built-in one for the profile's issuer (see
    :func:`fermix_providers.oauth.flows.default_refresher`); a profile without a refresh
    token (a ``claude setup-token`` value) simply never refreshes.
    """

    def __init__(
        self,
        auth_store: AuthStore,
        profile: str,
        refresher: Refresher | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if auth_store is None:
            raise ProviderError(
                ErrorKind.OAUTH,
                "no auth.json store was configured for OAuth mode; this is a setup bug — "
                'report it, or switch the provider to auth_mode = "api_key"',
                provider=PROFILE_PROVIDERS.get(profile),
            )
        self._store = auth_store
        self._profile = profile
        self._refresher = refresher
        self._clock = clock
        self._provider = PROFILE_PROVIDERS.get(profile)
        self._key = (os.path.realpath(auth_store.path), profile)
        self._cache: dict[str, Any] | None = None
        self._signature: tuple[int, int, int] | None = None
        #: The access token this source last handed out; a refresh that finds a different,
        #: live token on disk adopts it instead of spending the refresh token.
        self._handed: str | None = None

    def __repr__(self) -> str:
        return f"TokenSource({self._profile!r}, store={self._store!r})"

    # ------------------------------------------------------------------ properties

    @property
    def profile(self) -> str:
        return self._profile

    @property
    def provider(self) -> str | None:
        return self._provider

    @property
    def account_id(self) -> str | None:
        """The account the tokens belong to (Codex sends it as ``ChatGPT-Account-Id``)."""
        try:
            profile = self._load()
        except ProviderError:
            return None
        value = (profile or {}).get("account_id")
        return value if isinstance(value, str) and value else None

    @property
    def expires_at(self) -> float | None:
        try:
            profile = self._load()
        except ProviderError:
            return None
        return _expires_at(profile or {})

    # ------------------------------------------------------------------ tokens

    async def access_token(self) -> str:
        """A token that is valid for at least :data:`EXPIRY_SKEW_SECONDS` more, if known."""
        profile = self._require(self._load())
        token = profile.get("access_token")
        if not isinstance(token, str) or not token:
            raise self._login_error("the stored login has no access token")
        if self._expiring(profile):
            if profile.get("refresh_token"):
                return await self.refresh()
            raise self._login_error("the stored login has expired and cannot be refreshed")
        self._handed = token
        return token

    async def refresh(self) -> str:
        """A token newer than the last one handed out, refreshing through the issuer if needed.

        When ``auth.json`` already holds a live token other than the one this source last
        handed out (another task or process refreshed, or a new login was written), that
        token is returned and no refresh token is spent. Concurrent callers in this process
        share one refresh; a caller whose refresh was cancelled does not cancel the others
        (they start their own). Other errors than :class:`ProviderError` (cancellation)
        leave waiters to retry by themselves.
        """
        key = self._key
        while True:
            flight = _INFLIGHT.get(key)
            if flight is None:
                break
            await flight.event.wait()
            if flight.error is not None:
                raise _copy_error(flight.error)
            if flight.token is not None:
                self._handed = flight.token
                return flight.token
            # The leader was cancelled before finishing; try again ourselves.

        flight = _INFLIGHT[key] = _Flight()
        try:
            token = await self._refresh_once()
        except ProviderError as exc:
            flight.error = exc
            raise
        else:
            flight.token = token
            return token
        finally:
            if _INFLIGHT.get(key) is flight:
                del _INFLIGHT[key]
            flight.event.set()

    async def _refresh_once(self) -> str:
        async with self._cross_process_lock():
            profile = self._require(self._load(force=True))
            stored = profile.get("access_token")
            if (
                isinstance(stored, str)
                and stored
                and stored != self._handed
                and not self._expiring(profile)
            ):
                # Another task or process refreshed already; its token is the new one.
                self._handed = stored
                return stored
            refresh_token = profile.get("refresh_token")
            if not isinstance(refresh_token, str) or not refresh_token:
                raise self._login_error("the stored login cannot be refreshed")
            refresher = self._refresher or _default_refresher(self._profile)
            if refresher is None:
                raise self._login_error(f"no refresh is known for the {self._profile!r} login")
            try:
                grant = await refresher(profile)
            except ProviderError as exc:
                if exc.kind not in (ErrorKind.OAUTH, ErrorKind.AUTH):
                    raise
                adopted = self._adopt_if_rotated_elsewhere(refresh_token)
                if adopted is not None:
                    return adopted
                raise self._login_error(f"the issuer refused the refresh ({exc.message})") from None
            await self._persist(profile, grant)
            self._handed = grant.access_token
            return grant.access_token

    def _adopt_if_rotated_elsewhere(self, spent: str) -> str | None:
        """After a refused refresh: a writer without our lock (a fresh login) may have won."""
        latest = self._load(force=True) or {}
        token = latest.get("access_token")
        if latest.get("refresh_token") not in (None, spent) and isinstance(token, str) and token:
            self._handed = token
            return token
        return None

    async def _persist(self, profile: Mapping[str, Any], grant: TokenGrant) -> None:
        changes = grant.profile_changes()
        if grant.expires_at is None:
            exp = jwt_claims(grant.access_token).get("exp")
            if isinstance(exp, int | float):
                changes["expires_at"] = float(exp)
            else:
                # An unknown lifetime must not inherit the old token's (past) expiry.
                changes["expires_at"] = None
        changes["refreshed_at"] = self._clock()
        try:
            merged = await anyio.to_thread.run_sync(
                lambda: self._store.update(self._profile, **changes)
            )
        except (AuthFileError, OSError) as exc:
            # The old refresh token is dead now; keep the new one in memory so this process
            # keeps working, and tell the owner why the next start will need a login.
            log.warning(
                "could not save refreshed %s tokens to %s (%s); they last until restart — "
                "fix the file and run `fermix auth login --provider %s`",
                self._profile,
                self._store.path,
                type(exc).__name__,
                self._provider or self._profile,
            )
            merged = {**profile, **changes}
        self._cache = dict(merged)
        self._signature = self._stat()

    # ------------------------------------------------------------------ plumbing

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._store.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._store_error(f"{self._store.path} cannot be read ({exc.strerror})") from None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _load(self, *, force: bool = False) -> dict[str, Any] | None:
        signature = self._stat()
        if force or signature != self._signature:
            try:
                self._cache = self._store.get(self._profile) if signature is not None else None
            except AuthFileError as exc:
                raise self._store_error(str(exc)) from None
            self._signature = signature
        return self._cache

    def _require(self, profile: dict[str, Any] | None) -> dict[str, Any]:
        if profile is None:
            raise self._login_error(f"no {self._profile!r} login is stored")
        return profile

    def _expiring(self, profile: Mapping[str, Any]) -> bool:
        expires = _expires_at(profile)
        return expires is not None and expires - EXPIRY_SKEW_SECONDS <= self._clock()

    def _login_error(self, what: str) -> ProviderError:
        target = self._provider or self._profile
        return ProviderError(
            ErrorKind.OAUTH,
            f"{what}; run `fermix auth login --provider {target}` (a running daemon picks the "
            "new login up at its next start: `fermix restart`)",
            provider=self._provider,
        )

    def _store_error(self, message: str) -> ProviderError:
        return ProviderError(ErrorKind.OAUTH, message, provider=self._provider)

    @contextlib.asynccontextmanager
    async def _cross_process_lock(self) -> AsyncIterator[None]:
        """Hold ``auth.json.refresh.lock`` while a refresh token is in flight.

        Polled with a non-blocking ``flock`` so cancellation never strands a worker thread
        that later acquires the lock for nobody.
        """
        if fcntl is None:  # pragma: no cover - platform specific
            yield
            return
        path = self._store.path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(path.name + ".refresh.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + CROSS_PROCESS_WAIT_SECONDS
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise ProviderError(
                            ErrorKind.OAUTH,
                            f"another process has been refreshing the {self._profile!r} login "
                            f"for over {CROSS_PROCESS_WAIT_SECONDS:g}s; try again, or run "
                            f"`fermix auth login --provider {self._provider or self._profile}`",
                            provider=self._provider,
                        ) from None
                    await anyio.sleep(_LOCK_POLL_SECONDS)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _expires_at(profile: Mapping[str, Any]) -> float | None:
    value = profile.get("expires_at")
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    exp = jwt_claims(profile.get("access_token")).get("exp")
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def _copy_error(error: ProviderError) -> ProviderError:
    """A fresh exception per waiter, so tracebacks from different tasks do not pile up."""
    return ProviderError(error.kind, error.message, **error._fields())


def _default_refresher(profile: str) -> Refresher | None:
    from fermix_providers.oauth.flows import default_refresher

    return default_refresher(profile)
