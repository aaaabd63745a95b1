"""The whole retry/failover matrix, written out as data rather than re-derived.

Every :class:`ErrorKind` must have a row: adding a kind without deciding how routing treats
it fails here.
"""

from __future__ import annotations

import itertools

import pytest
from fermix_core.provider import ErrorKind, ProviderError
from fermix_core.routing.policy import (
    DEFAULT_RETRY_BUDGET,
    Action,
    continuation_action,
    initial_action,
)

R, F, S = Action.RETRY_SAME, Action.FAILOVER, Action.SURFACE

#: kind: (initial interactive first failure, initial interactive after the retry budget,
#:        initial job (inner retry off), continuation, continuation with measured pre-response)
MATRIX: dict[ErrorKind, tuple[Action, Action, Action, Action, Action]] = {
    ErrorKind.TIMEOUT: (R, F, F, S, R),
    ErrorKind.TRANSPORT: (R, F, F, R, R),
    ErrorKind.CONNECTION_UNAVAILABLE: (R, S, S, S, S),
    ErrorKind.SERVER_ERROR: (R, F, F, S, S),
    ErrorKind.OVERLOADED: (R, F, F, R, R),
    ErrorKind.RATE_LIMIT: (F, F, F, S, S),
    ErrorKind.QUOTA: (F, F, F, S, S),
    ErrorKind.AUTH: (S, S, S, S, S),
    ErrorKind.OAUTH: (F, F, F, S, S),
    ErrorKind.CONTEXT_LENGTH: (S, S, S, S, S),
    ErrorKind.INVALID_REQUEST: (S, S, S, S, S),
    ErrorKind.CONTENT_FILTER: (S, S, S, S, S),
    ErrorKind.UNSUPPORTED_INPUT: (S, S, S, S, S),
    ErrorKind.UNKNOWN: (S, S, S, S, S),
}


def err(kind: ErrorKind, *, visible: bool = False, pre_response: bool = False) -> ProviderError:
    return ProviderError(
        kind, "failed", provider="p", visible_output=visible, pre_response=pre_response
    )


def test_every_error_kind_has_a_decided_row() -> None:
    assert set(MATRIX) == set(ErrorKind)


CASES = [
    (kind, phase, visible, job)
    for kind, phase, visible, job in itertools.product(
        ErrorKind, ("initial", "continuation"), (False, True), (False, True)
    )
]


@pytest.mark.parametrize(("kind", "phase", "visible", "job"), CASES)
def test_matrix(kind: ErrorKind, phase: str, visible: bool, job: bool) -> None:
    first, _exhausted, as_job, cont, _measured = MATRIX[kind]
    if phase == "initial":
        got = initial_action(err(kind, visible=visible), attempt=0, job=job)
        expected = as_job if job else first
    else:
        # The job flag does not exist for continuations: they retry on every surface.
        got = continuation_action(err(kind, visible=visible))
        expected = cont
    if visible:
        expected = S  # a retry or a hop after visible streamed output would duplicate it
    assert got is expected, (kind, phase, visible, job)


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_initial_after_the_budget_is_spent(kind: ErrorKind) -> None:
    _, exhausted, *_ = MATRIX[kind]
    got = initial_action(err(kind), attempt=DEFAULT_RETRY_BUDGET, job=False)
    assert got is exhausted
    # Visible output still wins after the budget.
    assert initial_action(err(kind, visible=True), attempt=5, job=False) is S


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_pre_response_only_matters_to_a_continuation_timeout(kind: ErrorKind) -> None:
    *_, cont_measured = MATRIX[kind]
    assert continuation_action(err(kind, pre_response=True)) is cont_measured
    assert continuation_action(err(kind, pre_response=True, visible=True)) is S
    # The initial call does not care whether a timeout was measured.
    first = MATRIX[kind][0]
    assert initial_action(err(kind, pre_response=True), attempt=0, job=False) is first


def test_budget_is_a_parameter_and_zero_disables_same_route_retry() -> None:
    timeout = err(ErrorKind.TIMEOUT)
    assert initial_action(timeout, attempt=0, job=False, budget=0) is F
    assert initial_action(timeout, attempt=3, job=False, budget=5) is R
    cut = err(ErrorKind.TRANSPORT)
    assert continuation_action(cut, attempt=1, budget=2) is R
    assert continuation_action(cut, attempt=2, budget=2) is S
    assert continuation_action(cut, budget=0) is S


def test_a_refused_host_and_the_network_race_are_different_rows() -> None:
    """The split the classifier makes: a refused or reset connection to one provider's
    host is ``transport`` (retry in place, then fail over); only the pool-checkout /
    wake-from-sleep race is ``connection_unavailable`` (retry in place, never fail over)."""
    refused, race = err(ErrorKind.TRANSPORT), err(ErrorKind.CONNECTION_UNAVAILABLE)
    for attempt in range(DEFAULT_RETRY_BUDGET):
        assert initial_action(refused, attempt=attempt, job=False) is R
        assert initial_action(race, attempt=attempt, job=False) is R
    assert initial_action(refused, attempt=DEFAULT_RETRY_BUDGET, job=False) is F
    assert initial_action(race, attempt=DEFAULT_RETRY_BUDGET, job=False) is S
    # A scheduled run fails over on a refused host at once; the runner owns the race.
    assert initial_action(refused, attempt=0, job=True) is F
    assert initial_action(race, attempt=0, job=True) is S
    # Mid tool loop a refused host is a cut (re-issued in place); the race surfaces.
    assert continuation_action(refused) is R
    assert continuation_action(race) is S


def test_connection_unavailable_never_fails_over_whatever_the_attempt() -> None:
    error = err(ErrorKind.CONNECTION_UNAVAILABLE)
    for attempt in range(6):
        assert initial_action(error, attempt=attempt, job=False) is not F
        assert initial_action(error, attempt=attempt, job=True) is S
