"""What to do when a model call fails: retry in place, fail over, or surface. Pure tables.

The decisions are kept apart from the loop that acts on them so that the whole matrix —
every error kind, initial or continuation, streamed-visible or not, job or interactive —
can be read in one screen and tested exhaustively without a clock or a provider.

The asymmetries are deliberate (``docs/routing.md`` explains each):

* A same-provider retry is spent before any failover hop, because the next route is a
  different model and the loop pins the winner for the rest of the turn: hopping on the
  first flake would silently re-target the whole turn onto a weaker model.
* ``connection_unavailable`` (no connection could be checked out: the pool race on wake
  from sleep) is network-wide, so it retries in place and never fails over — another
  provider is behind the same dead network.
* Scheduled jobs (``inner_retry`` off) skip the in-place retry entirely: the job runner has
  its own deadline-bounded retry, and two stacked loops could overrun the job's timeout.
* A continuation (mid tool loop) never switches provider; it re-issues in place only for
  failures that provably produced nothing: a pre-response timeout the adapter *measured*,
  a transport cut, a declared overload.
* Nothing is retried or failed over once the user has seen streamed output: a retry would
  show it twice.
"""

from __future__ import annotations

from enum import StrEnum

from fermix_core.provider import ErrorKind, ProviderError

__all__ = [
    "CONTINUATION_RETRY_KINDS",
    "DEFAULT_RETRY_BUDGET",
    "FAILOVER_KINDS",
    "INITIAL_RETRY_KINDS",
    "Action",
    "continuation_action",
    "initial_action",
]

#: Same-route retries per route before a hop (initial call) or before surfacing.
DEFAULT_RETRY_BUDGET = 2


class Action(StrEnum):
    RETRY_SAME = "retry_same"
    FAILOVER = "failover"
    SURFACE = "surface"


#: Transient infrastructure failures an interactive initial call retries on the same route.
INITIAL_RETRY_KINDS: frozenset[ErrorKind] = frozenset(
    {
        ErrorKind.CONNECTION_UNAVAILABLE,
        ErrorKind.TIMEOUT,
        ErrorKind.TRANSPORT,
        ErrorKind.SERVER_ERROR,
        # A 503/529 "overloaded" is provider 5xx too: a brief overload self-heals in place.
        ErrorKind.OVERLOADED,
    }
)

#: Failures that may move an initial call to the next route once retries are spent.
#: ``oauth`` is a credential that still failed after the adapter's own refresh and retry;
#: an API-key ``auth`` failure is the operator's to fix and another route would only hide it.
FAILOVER_KINDS: frozenset[ErrorKind] = frozenset(
    {
        ErrorKind.TIMEOUT,
        ErrorKind.TRANSPORT,
        ErrorKind.SERVER_ERROR,
        ErrorKind.OVERLOADED,
        ErrorKind.RATE_LIMIT,
        ErrorKind.QUOTA,
        ErrorKind.OAUTH,
    }
)

#: Failures a continuation re-issues in place (``timeout`` only when measured pre-response).
CONTINUATION_RETRY_KINDS: frozenset[ErrorKind] = frozenset(
    {ErrorKind.TIMEOUT, ErrorKind.TRANSPORT, ErrorKind.OVERLOADED}
)


def initial_action(
    error: ProviderError,
    *,
    attempt: int,
    job: bool,
    budget: int = DEFAULT_RETRY_BUDGET,
) -> Action:
    """The next step after the initial call of a turn failed with *error* on one route.

    *attempt* counts the same-route retries already made on this route (0 after the first
    failure). *job* is true for scheduled runs, whose request has ``inner_retry`` off.
    ``FAILOVER`` means "move on if there is a next route"; the caller surfaces when there is
    none.
    """
    if error.visible_output:
        return Action.SURFACE
    kind = error.kind
    if not job and kind in INITIAL_RETRY_KINDS and attempt < budget:
        return Action.RETRY_SAME
    if kind in FAILOVER_KINDS:
        return Action.FAILOVER
    return Action.SURFACE


def continuation_action(
    error: ProviderError,
    *,
    attempt: int = 0,
    budget: int = DEFAULT_RETRY_BUDGET,
) -> Action:
    """The next step after a continuation call (mid tool loop) failed with *error*.

    Never ``FAILOVER``: the tool loop is pinned to its route. ``pre_response`` must be what
    the adapter measured; callers drop the claim for adapters that do not count chunks.
    """
    if error.visible_output or attempt >= budget:
        return Action.SURFACE
    kind = error.kind
    if kind not in CONTINUATION_RETRY_KINDS:
        return Action.SURFACE
    if kind is ErrorKind.TIMEOUT and not error.pre_response:
        return Action.SURFACE
    return Action.RETRY_SAME
