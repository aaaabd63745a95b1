"""The SSRF corpus (``tests/hostile/ssrf.txt``) against the production guard and web_fetch.

Every refused case is checked twice: the guard alone must refuse it, and ``web_fetch`` with
that guard must come back with an error output (never an exception, never a connection).
Allowed cases are only vetted — fetching them would leave the machine — to show the guard
still lets the public internet through. The resolver answers from the corpus alone, so no
case ever reaches real DNS.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.home import FermixHome
from fermix_core.tool import ToolContext, ToolError, Trust
from fermix_tools.web.fetch import WebFetch, WebFetcher
from fermix_tools.web.plugin import WEB_FETCH
from fermix_tools.web.ssrf import SSRFGuard

CORPUS = Path(__file__).parent / "hostile" / "ssrf.txt"


def load_cases() -> list[tuple[str, bool, tuple[str, ...]]]:
    cases = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        allowed = line.startswith("allow ")
        if allowed:
            line = line[len("allow ") :].strip()
        url, _, answers = line.partition(" => ")
        addresses = tuple(a.strip() for a in answers.split(",") if a.strip())
        cases.append((url.strip(), allowed, addresses))
    return cases


CASES = load_cases()
REFUSED = [(url, answers) for url, allowed, answers in CASES if not allowed]
ALLOWED = [(url, answers) for url, allowed, answers in CASES if allowed]


def corpus_resolver(url: str, answers: tuple[str, ...]):
    async def resolve(host: str, port: int) -> list[str]:
        if not answers:
            raise AssertionError(f"{url}: the guard consulted DNS for {host!r}")
        return list(answers)

    return resolve


def test_the_corpus_is_substantial() -> None:
    assert len(REFUSED) >= 90
    assert len(ALLOWED) >= 5


@pytest.mark.anyio
@pytest.mark.parametrize(("url", "answers"), REFUSED, ids=[u for u, _ in REFUSED])
async def test_the_guard_refuses(url: str, answers: tuple[str, ...]) -> None:
    with pytest.raises(ToolError):
        await SSRFGuard(corpus_resolver(url, answers)).vet(url)


@pytest.mark.anyio
@pytest.mark.parametrize(("url", "answers"), REFUSED, ids=[u for u, _ in REFUSED])
async def test_web_fetch_returns_an_error_output(
    url: str, answers: tuple[str, ...], tmp_path: Path
) -> None:
    guard = SSRFGuard(corpus_resolver(url, answers))
    tool = WebFetch(WEB_FETCH, fetcher=WebFetcher(guard))
    ctx = ToolContext(trust=Trust.OPERATOR, cwd=tmp_path, home=FermixHome(tmp_path))
    out = await tool.invoke({"url": url}, ctx)
    assert out.is_error, out.text


@pytest.mark.anyio
@pytest.mark.parametrize(("url", "answers"), ALLOWED, ids=[u for u, _ in ALLOWED])
async def test_public_targets_pass_the_guard(url: str, answers: tuple[str, ...]) -> None:
    target = await SSRFGuard(corpus_resolver(url, answers)).vet(url)
    assert target.addresses
