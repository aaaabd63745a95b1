"""A cold, in-process ``fermix ask "hi"`` against a loopback model, no daemon running.

This is the whole experience of a one-off question from the terminal: a new interpreter,
the CLI, plugin discovery, config validation, routing, opening ``memory.db``, one turn
over real HTTP to an OpenAI-compatible server on 127.0.0.1 (configured as the keyless
``ollama`` provider, as an installed Ollama would be), the reply printed, everything
closed. The model answers at once, so the time is ours.

Each sample is a fresh process exec'd by GNU time, whose ``%M`` is the peak RSS of that
process alone (see ``bench_cli_startup.py``). Bytecode writes are allowed and one warm-up
run creates the ``.pyc`` files and ``memory.db``, as on any machine after the first use.
Every run asks in its own session so each one does the same work.

By default the ask runs from this environment (the uv workspace: editable packages, dev
dependencies installed). With ``FERMIX_BENCH_INSTALLED=1`` it runs from a fresh virtualenv
that holds what ``pip install`` of the meta distribution would: the workspace's packages
built as wheels (non-editable) and the locked runtime dependencies, no dev ones (uv builds
it from its cache in a few seconds). The results say which.

Budget (first-run issue): median ≤ 300 ms and median peak RSS ≤ 45 MiB. Wall time swings
with whatever else the machine runs; the process's own CPU time is reported beside it, and
the load average at the start and end of the run is recorded with the results.

"Bytecode cached, as an installed package runs" is checked, not assumed: after the warm-up
one more ask runs under ``python -v``, and the results record how many modules it loaded
from ``.pyc`` files and how many it had to compile from source (``compiled_from_source``
should be 0; the bench stops if it is not).

``python bench/run.py cold_ask`` writes ``bench/results/cold_ask.json``; running this file
directly only prints the same JSON.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback, chat_completion

RUNS = 15
GNU_TIME = "/usr/bin/time"
MODEL = "qwen3"
ANSWER = "Hello from the loopback model."
BUDGET_MEDIAN_MS = 300.0
BUDGET_RSS_MIB = 45.0


def completion(request: RecordedRequest) -> Reply:
    return chat_completion(ANSWER, model=MODEL)


def _sample(argv: list[str], env: dict[str, str], expect: str | None) -> tuple[float, float, float]:
    """One process: (wall s, CPU s, peak RSS MiB). Fails loudly if the ask did not answer.

    The peak RSS is GNU time's ``%M`` (the process alone). The CPU time is the growth of
    this process's reaped-children usage across the run, which has microsecond resolution
    (GNU time's ``%U``/``%S`` come in 10 ms steps); it includes GNU time's own ~1 ms.
    """
    with tempfile.NamedTemporaryFile("r") as report:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        result = subprocess.run(
            [GNU_TIME, "-o", report.name, "-f", "%M", *argv],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if result.returncode != 0 or (expect is not None and expect not in result.stdout):
            raise SystemExit(
                f"{' '.join(argv)} failed (exit {result.returncode}); stdout: "
                f"{result.stdout.strip()!r}; stderr: {result.stderr.strip()[-2000:]}"
            )
        rss_kib = report.read().strip().splitlines()[-1].split()[0]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, float(rss_kib) / 1024.0


def _measure(make_argv, env: dict[str, str], expect: str | None) -> dict:
    _sample(make_argv("warm"), env, expect)  # .pyc files, memory.db, page cache
    times, cpu, rss = [], [], []
    for i in range(RUNS):
        t, c, m = _sample(make_argv(f"run-{i}"), env, expect)
        times.append(t * 1000)
        cpu.append(c * 1000)
        rss.append(m)
    ordered = sorted(times)
    return {
        "runs": RUNS,
        "median_ms": round(statistics.median(times), 2),
        "p90_ms": round(ordered[int(0.9 * (RUNS - 1))], 2),
        "min_ms": round(ordered[0], 2),
        "max_ms": round(ordered[-1], 2),
        # user + system CPU of the process: far steadier than wall time on a shared machine.
        "median_cpu_ms": round(statistics.median(cpu), 1),
        "max_rss_mib": round(max(rss), 2),
        "median_rss_mib": round(statistics.median(rss), 2),
    }


def _installed(tmp: Path) -> tuple[str, str]:
    """A virtualenv holding the workspace as a user install would: (python, fermix)."""
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("FERMIX_BENCH_INSTALLED needs uv on PATH (pip install uv)")
    root = Path(__file__).resolve().parent.parent
    venv = tmp / "venv"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, env=env)
    env["VIRTUAL_ENV"] = str(venv)
    locked = subprocess.run(
        [uv, "export", "-q", "--no-dev", "--all-packages", "--no-emit-workspace", "--no-hashes",
         "--format", "requirements-txt"],
        cwd=root, check=True, capture_output=True, text=True, env=env,
    ).stdout  # fmt: skip
    requirements = tmp / "requirements.txt"
    requirements.write_text(locked)
    subprocess.run([uv, "pip", "install", "-q", "-r", str(requirements)], check=True, env=env)
    projects = [
        str(p) for p in sorted((root / "packages").iterdir()) if (p / "pyproject.toml").exists()
    ]
    subprocess.run(
        [uv, "pip", "install", "-q", "--no-deps", *projects, str(root)],
        cwd=root,
        check=True,
        env=env,
    )
    return str(venv / "bin" / "python"), str(venv / "bin" / "fermix")


def _bytecode(python: str, fermix: str, env: dict[str, str]) -> dict:
    """One warm ask under ``python -v``: modules loaded from ``.pyc`` vs compiled now.

    The import system says ``# <pyc> matches <source>`` for a module it loads from a cached
    file and ``# code object from <source>.py`` for one it compiles.
    """
    result = subprocess.run(
        [python, "-v", fermix, "ask", "hi", "--session", "bytecode-check"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 or ANSWER not in result.stdout:
        raise SystemExit(f"the bytecode check ask failed: {result.stderr.strip()[-2000:]}")
    from_pyc = compiled = 0
    compiled_names: list[str] = []
    for line in result.stderr.splitlines():
        if line.startswith("# ") and " matches " in line and line.split()[1].endswith(".pyc"):
            from_pyc += 1
        elif line.startswith("# code object from "):
            path = line.removeprefix("# code object from ").strip("'")
            if path.endswith(".py"):
                compiled += 1
                compiled_names.append(path)
    if compiled:
        raise SystemExit(
            f"{compiled} modules were compiled from source after the warm-up (is "
            f"PYTHONDONTWRITEBYTECODE set, or the tree read-only?): {compiled_names[:5]}"
        )
    return {"loaded_from_pyc": from_pyc, "compiled_from_source": compiled}


def _environment(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for name in ("FERMIX_LOAD_PLUGINS", "OLLAMA_BASE_URL", "FERMIX_TRACE_CONTENT"):
        env.pop(name, None)
    env["FERMIX_HOME"] = str(home)
    # Never touch the machine's real keyring from a benchmark (nothing here has a secret).
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    return env


def run() -> dict:
    if not os.path.exists(GNU_TIME):
        raise SystemExit("GNU time is needed for RSS (apt-get install time)")
    installed = os.environ.get("FERMIX_BENCH_INSTALLED") == "1"
    with (
        tempfile.TemporaryDirectory(prefix="fermix-bench-ask-") as tmp,
        ThreadedLoopback(completion) as model,
    ):
        if installed:
            python, fermix = _installed(Path(tmp))
        else:
            python = sys.executable
            found = shutil.which("fermix", path=os.path.dirname(sys.executable))
            if found is None:
                raise SystemExit("fermix is not installed in this environment (uv sync first)")
            fermix = found
        home = Path(tmp) / "home"
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\n"
            "primary = true\n"
            f'base_url = "{model.url}/v1"\n'
            f'default_model = "{MODEL}"\n'
        )
        env = _environment(home)
        if (home / "daemon.sock").exists():
            raise SystemExit("a daemon socket exists in the bench home; the ask would not be cold")
        load_before = os.getloadavg()
        bare = _measure(lambda _s: [python, "-c", "pass"], env, None)
        ask = _measure(lambda s: [fermix, "ask", "hi", "--session", s], env, ANSWER)
        bytecode = _bytecode(python, fermix, env)
        requests = len(model.requests)
        load_after = os.getloadavg()
    within = ask["median_ms"] <= BUDGET_MEDIAN_MS and ask["median_rss_mib"] <= BUDGET_RSS_MIB
    return {
        "environment": (
            "installed: the workspace as wheels, locked runtime dependencies, no dev ones"
            if installed
            else "workspace: editable packages, dev dependencies installed"
        ),
        "python_c_pass": bare,
        "fermix_ask": ask,
        "model_requests": requests,
        "bytecode": bytecode,
        "ask_minus_bare_median_ms": round(ask["median_ms"] - bare["median_ms"], 2),
        "budget": {"median_ms_max": BUDGET_MEDIAN_MS, "rss_mib_max": BUDGET_RSS_MIB},
        "within_budget": within,
        "load_average_1m": {"start": round(load_before[0], 2), "end": round(load_after[0], 2)},
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
