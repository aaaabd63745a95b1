"""The HTTP ingress under a real uvicorn on an ephemeral loopback port, with a real client."""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from fermix_core.channel import WebhookRequest, WebhookResponse, WebhookRoute
from fermix_core.channels import ingress as ingress_module
from fermix_core.channels.ingress import HttpIngress, app_factory, build_app, resolve_bind

pytestmark = pytest.mark.anyio


class Recorder:
    def __init__(self) -> None:
        self.requests: list[WebhookRequest] = []

    async def __call__(self, request: WebhookRequest) -> WebhookResponse:
        self.requests.append(request)
        if request.body == b"explode":
            raise RuntimeError("secret-token-123 leaked in an exception")
        if request.method == "GET":
            return WebhookResponse(body=request.query.get("hub.challenge", "").encode())
        return WebhookResponse(202, b'{"ok":true}', "application/json", {"x-handled": "yes"})


def ready_state(flag: list[bool]) -> Any:
    def ready() -> tuple[bool, dict[str, Any]]:
        return flag[0], {"ready": flag[0], "channels": [{"name": "x", "state": "ready"}]}

    return ready


@pytest.fixture(params=["eager-httptools", "lazy-httptools", "eager-h11", "lazy-h11"])
async def served(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[httpx.AsyncClient, Recorder, list[bool], list[str]]]:
    """Every test runs against an app built up front and one built on the first connection
    (what the daemon does): the lazy server's first request is each test's first request.
    Both under httptools' parser (the default) and h11's (where httptools is missing)."""
    built, parser = request.param.split("-")
    monkeypatch.setattr(ingress_module, "http_implementation", lambda: parser)
    recorder = Recorder()
    flag = [False]
    routes = [
        ("hook", WebhookRoute("/webhook/hook", ("GET", "POST"), recorder, max_body_bytes=64)),
        ("rival", WebhookRoute("/webhook/hook", ("POST",), recorder)),
        ("sneaky", WebhookRoute("/health/ready", ("GET",), recorder)),
        ("big", WebhookRoute("/webhook/big", ("POST",), recorder, max_body_bytes=10_000_000)),
    ]
    options: dict[str, Any] = {
        "live": lambda: {"ok": True},
        "ready": ready_state(flag),
        "routes": routes,
        "max_body_bytes": 1000,
    }
    if built == "eager":
        app, paths = build_app(**options)
        ingress = HttpIngress(app, bind="127.0.0.1", port=0, routes=paths)
    else:
        make_app, paths = app_factory(**options)
        ingress = HttpIngress(make_app=make_app, bind="127.0.0.1", port=0, routes=paths)
    async with ingress.serving() as info:
        assert info.error is None
        assert info.url is not None and info.port != 0
        async with httpx.AsyncClient(base_url=info.url, timeout=10) as client:
            yield client, recorder, flag, paths


async def test_health_endpoints(served) -> None:
    client, _, flag, _ = served
    assert (await client.get("/health")).json() == {"ok": True}
    assert (await client.get("/health/live")).json() == {"ok": True}
    not_ready = await client.get("/health/ready")
    assert not_ready.status_code == 503
    assert not_ready.json()["channels"][0]["state"] == "ready"
    flag[0] = True
    assert (await client.get("/health/ready")).status_code == 200
    assert (await client.post("/health")).status_code == 405
    assert (await client.get("/nowhere")).status_code == 404


async def test_webhook_requests_reach_the_handler_raw(served) -> None:
    client, recorder, _, paths = served
    challenge = await client.get(
        "/webhook/hook", params=[("hub.challenge", "1158201444"), ("hub.challenge", "second")]
    )
    assert challenge.status_code == 200 and challenge.text == "1158201444"
    body = b'{"a":  1}\n'
    posted = await client.post(
        "/webhook/hook", content=body, headers={"X-Hub-Signature-256": "sha256=ab"}
    )
    assert posted.status_code == 202
    assert posted.headers["x-handled"] == "yes"
    assert posted.headers["content-type"].startswith("application/json")
    request = recorder.requests[-1]
    assert request.body == body  # exactly the bytes sent, for signature checks
    assert request.headers["x-hub-signature-256"] == "sha256=ab"
    assert request.path == "/webhook/hook" and request.method == "POST"
    # The rival's duplicate and the reserved path were skipped.
    assert paths == ["GET /webhook/hook", "POST /webhook/hook", "POST /webhook/big"]


async def test_bodies_over_the_cap_are_refused_unread(served) -> None:
    client, recorder, _, _ = served
    before = len(recorder.requests)
    assert (await client.post("/webhook/hook", content=b"x" * 65)).status_code == 413

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"y" * 20

    assert (await client.post("/webhook/hook", content=chunks())).status_code == 413
    # The app-wide cap (1000) wins over a route asking for more.
    assert (await client.post("/webhook/big", content=b"z" * 1001)).status_code == 413
    assert (await client.post("/webhook/big", content=b"z" * 1000)).status_code == 202
    assert len(recorder.requests) == before + 1


async def test_a_failing_handler_answers_500_without_detail(served, caplog) -> None:
    client, _, _, _ = served
    with caplog.at_level(logging.ERROR, logger="fermix.ingress"):
        answer = await client.post("/webhook/hook", content=b"explode")
    assert answer.status_code == 500
    assert "secret" not in answer.text
    assert any("webhook handler" in r.getMessage() for r in caplog.records)


async def test_the_daemon_keeps_its_signal_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    app, _ = build_app(live=dict, ready=lambda: (True, {}))
    async with HttpIngress(app, port=0).serving() as info:
        assert signal.getsignal(signal.SIGTERM) is before
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{info.url}/health/live")).status_code == 200
    assert signal.getsignal(signal.SIGTERM) is before


async def test_a_port_in_use_is_an_error_not_a_crash() -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        app, _ = build_app(live=dict, ready=lambda: (True, {}))
        async with HttpIngress(app, port=port).serving() as info:
            assert info.url is None
            assert f"127.0.0.1:{port}" in (info.error or "")
            assert "[fermix_web] port" in (info.error or "")
    finally:
        holder.close()


def test_bind_address_from_the_environment(caplog) -> None:
    assert resolve_bind({}) == "127.0.0.1"
    assert resolve_bind({"FERMIX_HTTP_BIND": " "}) == "127.0.0.1"
    assert resolve_bind({"FERMIX_HTTP_BIND": "::1"}) == "::1"
    with caplog.at_level(logging.WARNING, logger="fermix.ingress"):
        wildcard = "0.0.0.0"  # noqa: S104 - the warning is what is tested
        assert resolve_bind({"FERMIX_HTTP_BIND": wildcard}) == wildcard
    assert any("every network interface" in r.getMessage() for r in caplog.records)


def test_the_listening_socket_is_tcp_so_asyncio_disables_nagle() -> None:
    from fermix_core.channels.ingress import _bind

    sock = _bind("127.0.0.1", 0)
    try:
        # asyncio sets TCP_NODELAY on accepted sockets only when proto is IPPROTO_TCP;
        # without it each small response waited ~40 ms for the client's delayed ACK.
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


async def test_a_lazy_ingress_answers_a_burst_of_first_connections() -> None:
    built: list[int] = []
    make, _ = app_factory(live=lambda: {"ok": True}, ready=lambda: (True, {}))

    def counted() -> Any:
        built.append(1)
        return make()

    async with HttpIngress(make_app=counted, port=0).serving() as info:
        assert built == []  # nothing connected yet: no app, no web stack
        codes: list[int] = []
        async with httpx.AsyncClient(base_url=info.url, timeout=30) as client:

            async def get() -> None:
                codes.append((await client.get("/health/live")).status_code)

            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(get)
        assert codes == [200] * 8
    assert built == [1]


async def test_a_lazy_ingress_nobody_connected_to_stops_at_once() -> None:
    built: list[int] = []
    make, _ = app_factory(live=dict, ready=lambda: (True, {}))
    ingress = HttpIngress(make_app=lambda: built.append(1) or make(), port=0)
    async with ingress.serving() as info:
        assert info.url is not None
    assert built == []
    with socket.socket() as probe:  # the port is closed again
        assert probe.connect_ex(("127.0.0.1", info.port)) != 0


def test_an_ingress_takes_an_app_or_a_factory() -> None:
    with pytest.raises(TypeError):
        HttpIngress()
    with pytest.raises(TypeError):
        HttpIngress(object(), make_app=object)


def test_httptools_parses_when_installed_and_idle_connections_outlive_their_senders() -> None:
    from fermix_core.channels.ingress import KEEP_ALIVE_SECONDS, _quiet_server

    server = _quiet_server(build_app(live=dict, ready=lambda: (True, {}))[0], 5.0)
    assert server.config.http == "httptools"  # a dependency of fermix-core
    # Longer than a sender's or proxy's own idle timeout (httpx 5 s, proxies 60-75 s), so
    # the sender closes first and never reuses a connection the server is closing.
    assert server.config.timeout_keep_alive == KEEP_ALIVE_SECONDS >= 75


async def test_one_keep_alive_connection_carries_many_deliveries(served) -> None:
    """A platform's sender reuses its connection: raw HTTP/1.1, one socket, 20 requests."""
    client, recorder, _, _ = served
    url = httpx.URL(str(client.base_url))
    stream = await anyio.connect_tcp(url.host, url.port)
    async with stream:
        for n in range(20):
            body = b"delivery %d" % n
            await stream.send(
                b"POST /webhook/hook HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            answer = b""
            while not answer.endswith(b'{"ok":true}'):
                answer += await stream.receive()
            assert answer.startswith(b"HTTP/1.1 202 ")
    assert [r.body for r in recorder.requests] == [b"delivery %d" % n for n in range(20)]


async def test_webhook_paths_answer_other_methods_as_before(served) -> None:
    """Webhook routes are served ahead of Starlette; what they do not take still gets
    Starlette's answers: 405 for a method the route lacks, HEAD for a GET route."""
    client, recorder, _, _ = served
    assert (await client.put("/webhook/hook", content=b"x")).status_code == 405
    assert (await client.get("/webhook/big")).status_code == 405
    head = await client.head("/webhook/hook")
    assert head.status_code == 202 and head.content == b""
    assert recorder.requests[-1].method == "HEAD"
    assert (await client.post("/webhook/hook/", content=b"x")).status_code in (307, 404)
