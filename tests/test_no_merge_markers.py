"""No tracked file carries a leftover merge-conflict marker (docs included, which no
interpreter would ever trip over)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.MULTILINE)


def test_no_tracked_file_has_a_conflict_marker() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    found = []
    for rel in filter(None, listed.split("\0")):
        path = ROOT / rel
        if path.suffix not in {".py", ".md", ".toml", ".json", ".yml", ".yaml", ".txt", ""}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        if MARKER.search(text):
            found.append(rel)
    assert found == []
