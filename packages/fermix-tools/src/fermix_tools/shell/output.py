"""How a finished command reads to the model: exit status first, then capped output.

The sandbox already caps what it *captures* (and stops a command that floods it); this
caps what the model *reads*. Long output keeps its head and its tail — a build log's
first lines say what ran, its last lines say why it failed — and the cut is announced
with the way to see everything (redirect to a file, then ``file_read``).
"""

from __future__ import annotations

from typing import Any

#: Characters of one stream the model reads: this much of the head, and of the tail.
HEAD_CHARS = 8_000
TAIL_CHARS = 12_000


def clip_stream(text: str) -> tuple[str, int]:
    """*text* with its middle cut when long; the second value is how much was cut."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text, 0
    omitted = len(text) - HEAD_CHARS - TAIL_CHARS
    cut = f"{text[:HEAD_CHARS]}\n[… {omitted} characters omitted …]\n{text[-TAIL_CHARS:]}"
    return cut, omitted


def render(result: Any, *, timeout: float, output_cap: int) -> tuple[str, dict[str, Any]]:
    """The text the model reads for *result* (a ``CommandResult``), and structured data."""
    if result.timed_out:
        status = (
            f"timed out after {timeout:g}s; the command and everything it started were "
            "stopped. Pass a larger timeout, or run long jobs in the background with output "
            "to a file."
        )
    elif result.exit_code is None:
        status = "stopped before it finished (no exit code)"
    else:
        status = f"exit code: {result.exit_code}"
    parts = [status]
    omitted = 0
    for label, stream in (("stdout", result.stdout), ("stderr", result.stderr)):
        if stream:
            shown, cut = clip_stream(stream)
            omitted += cut
            parts.append(f"--- {label} ---\n{shown.rstrip(chr(10))}")
    if not result.stdout and not result.stderr:
        parts.append("(no output)")
    if result.truncated:
        parts.append(
            f"[output passed the {output_cap // 1024} KB capture limit, so the command was "
            "stopped there; redirect its output to a file and read that with file_read]"
        )
    elif omitted:
        parts.append(
            "[the middle of long output was omitted; redirect it to a file and read that "
            "with file_read to see all of it]"
        )
    data = {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "truncated": result.truncated,
    }
    return "\n".join(parts), data
