"""Confinement cost: ``echo hi`` through the ``shell`` tool with and without bubblewrap.

The whole tool call is timed — path checks, command screening, the child environment,
building the bubblewrap plan (one ``lstat`` per protected path), starting the process and
reaping its group — so the difference between the two rows is what confinement adds to
every shell call. Budget: at most 15 ms added at p50. ``confined_network_on`` is the same
without ``--unshare-net``: the difference is the kernel's cost of a new network namespace.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

RUNS = 200


def _summary(samples: list[float]) -> dict:
    samples = sorted(samples)
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(samples), 2),
        "p99_ms": round(samples[int(0.99 * (len(samples) - 1))], 2),
    }


async def _measure(tools: dict, runs: int) -> dict:
    """Alternate the settings call by call, so the load of a shared machine falls on both."""
    samples: dict[str, list[float]] = {name: [] for name in tools}
    for index in range(runs + 10):
        for name, (tool, ctx) in tools.items():
            started = time.perf_counter()
            output = await tool.invoke({"command": "echo hi"}, ctx)
            elapsed = (time.perf_counter() - started) * 1e3
            assert "hi" in output.text, output.text
            if index >= 10:  # the first calls warm caches and the probe
                samples[name].append(elapsed)
    return {name: _summary(values) for name, values in samples.items()}


def run() -> dict:
    import anyio
    from fermix_core.home import FermixHome
    from fermix_core.sandbox import SandboxPolicy
    from fermix_core.sandbox.confine import probe
    from fermix_core.tool import ToolContext, Trust
    from fermix_tools.shell.exec import Shell
    from fermix_tools.shell.plugin import SHELL

    found = probe()
    root = Path(tempfile.mkdtemp(prefix="fermix-bench-confine-"))
    os_home = root / "home"
    (os_home / ".ssh").mkdir(parents=True)
    home = FermixHome(os_home / ".fermix")
    home.ensure()
    workspace = home.ensure_dir("workspace")
    results: dict = {"backend": found.backend, "detail": found.detail}

    async def main() -> None:
        tools = {}
        settings = (
            ("screened_only", "off", False),
            ("confined", "auto", False),
            ("confined_network_on", "auto", True),
        )
        for name, setting, network in settings:
            policy = SandboxPolicy(
                mode="strict",
                os_home=os_home,
                fermix_home=home.path,
                workspace=workspace,
                environ={"PATH": "/usr/bin:/bin"},
                confinement=setting,
                network=network,
            )
            ctx = ToolContext(
                trust=Trust.OPERATOR,
                cwd=workspace,
                home=home,
                local=True,
                services={"sandbox": policy},
            )
            tools[name] = (Shell(SHELL), ctx)
        results.update(await _measure(tools, RUNS))

    anyio.run(main)
    if found.available:
        results["added_p50_ms"] = round(
            results["confined"]["p50_ms"] - results["screened_only"]["p50_ms"], 2
        )
        results["added_p99_ms"] = round(
            results["confined"]["p99_ms"] - results["screened_only"]["p99_ms"], 2
        )
        results["added_p50_ms_network_on"] = round(
            results["confined_network_on"]["p50_ms"] - results["screened_only"]["p50_ms"], 2
        )
    return results
