"""A stand-in ``signal-cli`` speaking signal-cli's documented JSON-RPC on stdin/stdout.

Started (through a small shell wrapper that adds ``--control SOCKET``) exactly as the adapter
starts the real one: ``[--config DIR] -a ACCOUNT jsonRpc --receive-mode manual …`` or
``--version``. It connects to the test's control socket, says hello (argv, the names in its
environment, its pid) and waits for its first command, ``config``:

* ``startup``: ``"ok"``; ``"unregistered"`` (prints signal-cli's "User … is not
  registered." on stderr and exits 1, as the real one does); ``"crash"`` (exit 3);
* ``style``: ``"plain"`` notifications (``params.envelope``) or ``"subscription"``
  (``params.subscription`` + ``params.result.envelope``, what ``subscribeReceive`` gives).

It then answers requests the way signal-cli does — ``subscribeReceive`` → subscription id,
``send`` → ``{"timestamp", "results": [{"recipientAddress", "type": "SUCCESS"}]}``,
``sendReaction``/``sendTyping``, ``version``; a line that is not JSON → ``-32700`` with
``id: null``; an unknown method → ``-32601`` — and reports every request to the control
socket, waiting for the test's ``ack`` before answering (so whatever the adapter sees
answered, the test has recorded). Further commands from the test: ``envelope`` (emit a
receive notification), ``raw`` (write bytes to stdout as they are: garbage, giant lines),
``fail`` (answer the next request of a method with the given JSON-RPC error), ``hang``
(stop answering), ``exit`` (write to stderr and exit with a code, mid-stream: after the
requests already read are answered).
"""

from __future__ import annotations

import json
import os
import queue
import socket
import sys
import threading
import time

_out_lock = threading.Lock()
_state: dict = {"style": "plain", "hang": False, "fail": {}, "account": None}
#: The test acknowledges each reported request before it is answered, so whatever the
#: adapter sees answered, the test has already recorded.
_acks: queue.Queue = queue.Queue()
#: Requests read and not answered yet; ``exit`` waits for them (a crash between requests).
_inflight = threading.Condition()
_pending = [0]


def _write(data: bytes) -> None:
    with _out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _emit(obj: dict) -> None:
    _write((json.dumps(obj, separators=(",", ":")) + "\n").encode())


class Control:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")
        self.lock = threading.Lock()

    def tell(self, event: dict) -> None:
        with self.lock:
            self.sock.sendall((json.dumps(event) + "\n").encode())

    def read(self) -> dict | None:
        line = self.file.readline()
        return json.loads(line) if line else None


def _notify(envelope: dict) -> None:
    account = _state["account"]
    if _state["style"] == "subscription":
        params = {"subscription": 0, "result": {"envelope": envelope, "account": account}}
    else:
        params = {"envelope": envelope, "account": account}
    _emit({"jsonrpc": "2.0", "method": "receive", "params": params})


def _commands(control: Control) -> None:
    while True:
        command = control.read()
        if command is None:
            os._exit(0)  # the test went away
        kind = command.get("cmd")
        if kind == "ack":
            _acks.put(True)
            continue
        if kind == "envelope":
            _notify(command["envelope"])
        elif kind == "raw":
            _write(command["data"].encode())
        elif kind == "fail":
            _state["fail"][command["method"]] = command["error"]
        elif kind == "hang":
            _state["hang"] = True
        elif kind == "exit":
            with _inflight:
                _inflight.wait_for(lambda: _pending[0] == 0, timeout=30)
            sys.stderr.write(command.get("stderr", ""))
            sys.stderr.flush()
            os._exit(int(command.get("code", 1)))
        control.tell({"event": "done", "cmd": kind})


def _answer(request: dict) -> dict | None:
    method = request.get("method")
    rid = request.get("id")
    params = request.get("params") or {}
    if method in _state["fail"]:
        return {"jsonrpc": "2.0", "error": _state["fail"].pop(method), "id": rid}
    now = int(time.time() * 1000)
    if method == "subscribeReceive":
        result: object = 0
    elif method == "send":
        recipients = params.get("recipient") or []
        if isinstance(recipients, str):
            recipients = [recipients]
        results = [
            {"recipientAddress": {"number": r, "uuid": None}, "type": "SUCCESS"} for r in recipients
        ]
        result = {"timestamp": now, "results": results}
    elif method == "sendReaction":
        result = {"timestamp": now, "results": []}
    elif method == "sendTyping":
        result = {}
    elif method == "version":
        result = {"version": "0.13.19-stub"}
    else:
        return {
            "jsonrpc": "2.0",
            "error": {"code": -32601, "message": "Method not implemented", "data": None},
            "id": rid,
        }
    return {"jsonrpc": "2.0", "result": result, "id": rid}


def main(argv: list[str]) -> int:
    if "--version" in argv:
        print("signal-cli 0.13.19-stub")
        return 0
    control = Control(argv[argv.index("--control") + 1])
    if "-a" in argv:
        _state["account"] = argv[argv.index("-a") + 1]
    control.tell({"event": "hello", "argv": argv, "env": sorted(os.environ), "pid": os.getpid()})
    config = control.read() or {}
    _state["style"] = config.get("style", "plain")
    startup = config.get("startup", "ok")
    if startup == "unregistered":
        sys.stderr.write(f"User {_state['account']} is not registered.\n")
        return 1
    if startup == "crash":
        sys.stderr.write("Exception in thread main: something broke\n")
        return 3
    threading.Thread(target=_commands, args=(control,), daemon=True).start()
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        try:
            request = json.loads(line)
        except ValueError:
            _emit(
                {
                    "jsonrpc": "2.0",
                    "error": {"code": -32700, "message": "Unrecognized token", "data": None},
                    "id": None,
                }
            )
            continue
        if _state["hang"]:
            control.tell({"event": "request", "request": request})
            _acks.get(timeout=60)
            continue
        with _inflight:
            _pending[0] += 1
        control.tell({"event": "request", "request": request})
        _acks.get(timeout=60)
        answer = _answer(request)
        if answer is not None:
            _emit(answer)
        with _inflight:
            _pending[0] -= 1
            _inflight.notify_all()
    control.tell({"event": "eof"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
