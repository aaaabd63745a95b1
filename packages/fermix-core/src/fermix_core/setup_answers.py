"""Answers of an interactive ``fermix setup`` that did not finish, offered again next time.

A setup run writes nothing until every step has run and the result validates, so a run
that fails (a key the keyring refuses, an invalid result, Ctrl-C) used to lose every answer
typed. The non-secret answers are kept in ``$FERMIX_HOME/setup-answers.json`` (0600) by the
flag of their question; the next interactive run shows each as the default in brackets
(Enter keeps it). A run that finishes forgets the answers of the steps it ran.

Secrets are never kept: answers to hidden prompts are not recorded at all, and an answer
the log redactor would mask (something shaped like an API key or token, or a configured
secret) is dropped too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger("fermix.setup")

FILE_NAME = "setup-answers.json"
FORMAT = 1
OFFERED_NOTE = (
    "The last `fermix setup` did not finish; its answers are offered in brackets (Enter "
    "keeps one). Secrets were not kept and are asked again."
)


def worth_keeping(answer: str) -> bool:
    """Whether *answer* may be written down: short, one line, and nothing the redactor masks."""
    from fermix_core.logs import redact

    return bool(answer) and len(answer) <= 1000 and "\n" not in answer and redact(answer) == answer


def load(home: Any) -> dict[str, str]:
    """The kept answers by flag; an unreadable or foreign file counts as none."""
    try:
        data = json.loads((home.path / FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    answers = data.get("answers")
    if not isinstance(answers, dict):
        return {}
    return {
        str(flag): value
        for flag, value in answers.items()
        if isinstance(value, str) and worth_keeping(value)
    }


def keep(home: Any, answers: Mapping[str, str]) -> bool:
    """Write *answers* (those worth keeping) for the next run; ``True`` if anything was."""
    kept = {flag: value for flag, value in answers.items() if worth_keeping(value)}
    if not kept:
        return False
    from fermix_core.fsutil import atomic_write

    payload = json.dumps({"format": FORMAT, "answers": kept}, indent=2, sort_keys=True)
    try:
        home.ensure()
        atomic_write(home.path / FILE_NAME, payload + "\n")
    except OSError as exc:
        log.warning("the setup answers could not be kept for the next run: %s", exc)
        return False
    return True


def finished(home: Any, flags: Iterable[str]) -> None:
    """A run finished: forget the answers to *flags*; the file goes once it is empty."""
    path = home.path / FILE_NAME
    if not path.exists():
        return
    left = {flag: value for flag, value in load(home).items() if flag not in set(flags)}
    if left:
        keep(home, left)
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("%s could not be removed: %s", path, exc)


def kept(home: Any) -> bool:
    return (home.path / FILE_NAME).exists()
