"""The redacting log path: patterns, the formatter, setup_logging and the crash hooks."""

from __future__ import annotations

import io
import json
import logging
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fermix_core import logs
from fermix_core.logs import (
    LOG_BACKUPS,
    LOG_MAX_BYTES,
    REDACTIONS,
    PrivateRotatingFileHandler,
    RedactingFormatter,
    marker,
    redact,
    setup_logging,
    teardown_logging,
)

CORPUS = json.loads((Path(__file__).parent / "data" / "token_corpus.json").read_text())
POSITIVE = CORPUS["positive"]
NEGATIVE = CORPUS["negative"]
OPENAI_TOKEN = next(e["token"] for e in POSITIVE if e["token"].startswith("sk-proj-"))
GITHUB_TOKEN = next(e["token"] for e in POSITIVE if e["token"].startswith("ghp_"))


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def clean_logging() -> Iterator[None]:
    """setup_logging changes process-wide state; put all of it back."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    formatters = {h: h.formatter for h in handlers}
    level = root.level
    hooks = (sys.excepthook, threading.excepthook)
    yield
    teardown_logging()
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler, formatter in formatters.items():
        handler.setFormatter(formatter)
    root.setLevel(level)
    sys.excepthook, threading.excepthook = hooks


# --------------------------------------------------------------------------- patterns


@pytest.mark.parametrize("entry", POSITIVE, ids=lambda e: f"{e['vendor']}:{e['token'][:10]}")
def test_corpus_token_is_redacted_with_its_vendor(entry: dict[str, str]) -> None:
    out = redact(entry["text"])
    assert out == entry["text"].replace(entry["token"], marker(entry["vendor"]))
    assert entry["token"] not in out


@pytest.mark.parametrize("text", NEGATIVE)
def test_ordinary_text_passes_through_unchanged(text: str) -> None:
    assert redact(text) == text


def test_corpus_covers_every_vendor_label() -> None:
    assert {vendor for vendor, _ in REDACTIONS} <= {e["vendor"] for e in POSITIVE}


def test_anthropic_keys_are_not_labelled_openai() -> None:
    for entry in POSITIVE:
        if entry["token"].startswith("sk-ant-"):
            assert marker("anthropic") in redact(entry["token"])
            assert marker("openai") not in redact(entry["token"])


def test_several_tokens_on_one_line() -> None:
    line = f"keys {OPENAI_TOKEN} and {GITHUB_TOKEN}; done"
    assert redact(line) == "keys [REDACTED:openai] and [REDACTED:github]; done"


def test_redaction_is_idempotent() -> None:
    for entry in POSITIVE:
        once = redact(entry["text"])
        assert redact(once) == once


def test_empty_text() -> None:
    assert redact("") == ""


# --------------------------------------------------------------------------- formatter


def record_with_exception(message: str, *args: object) -> logging.LogRecord:
    try:
        raise ValueError(f"provider rejected {OPENAI_TOKEN}")
    except ValueError:
        return logging.LogRecord(
            "fermix.test", logging.ERROR, __file__, 1, message, args, sys.exc_info()
        )


def test_formatter_redacts_message_args_and_exception() -> None:
    record = record_with_exception("token was %s", GITHUB_TOKEN)
    out = RedactingFormatter().format(record)
    assert "token was [REDACTED:github]" in out
    assert "ValueError: provider rejected [REDACTED:openai]" in out
    assert OPENAI_TOKEN not in out
    assert GITHUB_TOKEN not in out
    # The traceback logging caches on the record is the redacted one, for every other handler.
    assert record.exc_text is not None
    assert OPENAI_TOKEN not in record.exc_text


def test_formatter_redacts_stack_info() -> None:
    record = logging.LogRecord("fermix.test", logging.INFO, __file__, 1, "hello", (), None)
    record.stack_info = (
        f'Stack (most recent call last):\n  File "x.py", line 1, in f\n    key = "{OPENAI_TOKEN}"'
    )
    out = RedactingFormatter().format(record)
    assert OPENAI_TOKEN not in out
    assert marker("openai") in out


def test_wrapping_keeps_the_inner_format() -> None:
    inner = logging.Formatter("<%(levelname)s> %(message)s")
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "k=%s", (GITHUB_TOKEN,), None)
    assert RedactingFormatter(inner=inner).format(record) == "<WARNING> k=[REDACTED:github]"


# --------------------------------------------------------------------------- setup_logging


def test_file_and_console_are_both_redacted(tmp_path: Path, clean_logging: None) -> None:
    console = io.StringIO()
    setup_logging(tmp_path, level="DEBUG", console_stream=console)
    log = logging.getLogger("fermix.test.setup")
    log.info("configured key %s", OPENAI_TOKEN)
    try:
        raise RuntimeError(f"request failed for {GITHUB_TOKEN}")
    except RuntimeError:
        log.exception("provider call failed")

    log_file = tmp_path / "logs" / "fermix.log"
    for text in (log_file.read_text(), console.getvalue()):
        assert "configured key [REDACTED:openai]" in text
        assert "RuntimeError: request failed for [REDACTED:github]" in text
        assert "Traceback (most recent call last)" in text
        assert OPENAI_TOKEN not in text
        assert GITHUB_TOKEN not in text


def test_log_dir_is_0700_and_file_0600(tmp_path: Path, clean_logging: None) -> None:
    old_umask = os.umask(0o000)
    try:
        setup_logging(tmp_path, console=False)
    finally:
        os.umask(old_umask)
    logging.getLogger("fermix.test").warning("hello")
    assert mode_of(tmp_path / "logs") == 0o700
    assert mode_of(tmp_path / "logs" / "fermix.log") == 0o600


def test_existing_wide_log_file_is_tightened(tmp_path: Path, clean_logging: None) -> None:
    (tmp_path / "logs").mkdir(mode=0o755)
    (tmp_path / "logs").chmod(0o755)
    log_file = tmp_path / "logs" / "fermix.log"
    log_file.write_text("old line\n")
    log_file.chmod(0o644)
    setup_logging(tmp_path, console=False)
    assert mode_of(tmp_path / "logs") == 0o700
    assert mode_of(log_file) == 0o600
    assert log_file.read_text().startswith("old line\n")  # appended to, not truncated


def test_setup_is_idempotent(tmp_path: Path, clean_logging: None) -> None:
    console = io.StringIO()
    before = len(logging.getLogger().handlers)
    setup_logging(tmp_path, console_stream=console)
    setup_logging(tmp_path, console_stream=console)
    assert len(logging.getLogger().handlers) == before + 2
    logging.getLogger("fermix.test").warning("exactly once")
    assert (tmp_path / "logs" / "fermix.log").read_text().count("exactly once") == 1
    assert console.getvalue().count("exactly once") == 1


def test_console_can_be_turned_off(tmp_path: Path, clean_logging: None) -> None:
    before = len(logging.getLogger().handlers)
    setup_logging(tmp_path, console=False)
    assert len(logging.getLogger().handlers) == before + 1


def test_level_is_applied(tmp_path: Path, clean_logging: None) -> None:
    setup_logging(tmp_path, level="WARNING", console=False)
    logging.getLogger("fermix.test").info("quiet-info-line")
    logging.getLogger("fermix.test").warning("loud-warning-line")
    text = (tmp_path / "logs" / "fermix.log").read_text()
    assert "loud-warning-line" in text
    assert "quiet-info-line" not in text


def test_accepts_a_home_object(tmp_path: Path, clean_logging: None) -> None:
    home_mod = pytest.importorskip("fermix_core.home")
    setup_logging(home_mod.FermixHome(tmp_path / "home"), console=False)
    logging.getLogger("fermix.test").warning("via FermixHome")
    assert "via FermixHome" in (tmp_path / "home" / "logs" / "fermix.log").read_text()


def test_handlers_present_before_setup_are_redacted_too(
    tmp_path: Path, clean_logging: None
) -> None:
    foreign = io.StringIO()
    handler = logging.StreamHandler(foreign)
    handler.setFormatter(logging.Formatter("FOREIGN %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        setup_logging(tmp_path, console=False)
        logging.getLogger("fermix.test").warning("key=%s", OPENAI_TOKEN)
    finally:
        root.removeHandler(handler)
    assert foreign.getvalue() == "FOREIGN key=[REDACTED:openai]\n"


def test_rotation_uses_the_documented_sizes(tmp_path: Path, clean_logging: None) -> None:
    setup_logging(tmp_path, console=False)
    ours = [h for h in logging.getLogger().handlers if isinstance(h, PrivateRotatingFileHandler)]
    assert len(ours) == 1
    assert (
        (ours[0].maxBytes, ours[0].backupCount)
        == (LOG_MAX_BYTES, LOG_BACKUPS)
        == (5 * 1024 * 1024, 5)
    )


def test_rotated_files_stay_private(tmp_path: Path) -> None:
    old_umask = os.umask(0o000)
    handler = PrivateRotatingFileHandler(tmp_path / "fermix.log", maxBytes=200, backupCount=2)
    try:
        handler.setFormatter(RedactingFormatter("%(message)s"))
        logger = logging.getLogger("fermix.test.rotation")
        logger.propagate = False
        logger.addHandler(handler)
        for i in range(30):
            logger.warning("line %03d with %s", i, GITHUB_TOKEN)
    finally:
        os.umask(old_umask)
        logger.removeHandler(handler)
        logger.propagate = True
        handler.close()
    files = sorted(tmp_path.glob("fermix.log*"))
    assert [f.name for f in files] == ["fermix.log", "fermix.log.1", "fermix.log.2"]
    for path in files:
        assert mode_of(path) == 0o600
        assert GITHUB_TOKEN not in path.read_text()


# --------------------------------------------------------------------------- crash reports


CRASH_SCRIPT = """
import sys
from fermix_core.logs import setup_logging
setup_logging(sys.argv[1], console=sys.argv[2] == "console")
token = sys.argv[3]
def handler():
    raise RuntimeError("daemon died holding " + token)
handler()
"""


@pytest.mark.parametrize("console", ["console", "no-console"])
def test_unhandled_exception_writes_a_redacted_crash_report(tmp_path: Path, console: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path), console, OPENAI_TOKEN],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    log_text = (tmp_path / "logs" / "fermix.log").read_text()
    assert "crash report: unhandled exception: RuntimeError" in log_text
    assert "RuntimeError: daemon died holding [REDACTED:openai]" in log_text
    assert "in handler" in log_text  # the traceback is there, only the token is gone
    # stderr still tells the operator what happened, exactly once, redacted.
    assert proc.stderr.count("RuntimeError: daemon died holding [REDACTED:openai]") == 1
    assert OPENAI_TOKEN not in log_text
    assert OPENAI_TOKEN not in proc.stderr


def test_thread_crash_is_logged_redacted(tmp_path: Path, clean_logging: None) -> None:
    setup_logging(tmp_path, console=False)

    def worker() -> None:
        raise ValueError(f"worker saw {GITHUB_TOKEN}")

    thread = threading.Thread(target=worker, name="poller-7")
    stderr = io.StringIO()
    real_stderr, sys.stderr = sys.stderr, stderr
    try:
        thread.start()
        thread.join()
    finally:
        sys.stderr = real_stderr
    text = (tmp_path / "logs" / "fermix.log").read_text()
    assert "crash report: unhandled exception in thread poller-7: ValueError" in text
    assert "ValueError: worker saw [REDACTED:github]" in text
    assert GITHUB_TOKEN not in text
    assert "ValueError: worker saw [REDACTED:github]" in stderr.getvalue()
    assert GITHUB_TOKEN not in stderr.getvalue()


def test_hooks_are_installed_once_and_removed_by_teardown(
    tmp_path: Path, clean_logging: None
) -> None:
    original = sys.excepthook
    setup_logging(tmp_path, console=False)
    installed = sys.excepthook
    assert installed is not original
    setup_logging(tmp_path, console=False)
    assert sys.excepthook is installed
    teardown_logging()
    assert sys.excepthook is original
    assert not any(getattr(h, "_fermix_handler", False) for h in logging.getLogger().handlers)


def test_known_secret_values_are_redacted_after_registration() -> None:
    value = "Zq8wX2vN5tR9pL3kJ7hG4fD1sA6mB0cY"
    try:
        assert redact(f"v={value}") == f"v={value}"
        logs.add_known_secret(value)
        logs.add_known_secret(value[:6])  # too short to redact safely; ignored
        assert redact(f"v={value}") == "v=[REDACTED:secret]"
        assert redact(value[:6]) == value[:6]
    finally:
        logs.forget_known_secrets()
    assert redact(f"v={value}") == f"v={value}"


def test_memos_of_redacted_text_are_emptied_when_a_secret_is_learnt() -> None:
    value = "Mw4pQ9xL2vB7nR5tK8cJ3hF6dS1aG0zY"
    memo = logs.redaction_memo()
    try:
        assert logs.remember(memo, f"id={value}", str.upper) == f"ID={value.upper()}"
        assert logs.redact_short(f"id={value}") == f"id={value}"
        assert memo == {f"id={value}": f"ID={value.upper()}"}
        logs.add_known_secret(value)
        assert memo == {}, "a memo made with the old secrets is never served after"
        assert logs.redact_short(f"id={value}") == "id=[REDACTED:secret]"
        assert logs.remember(memo, f"id={value}") == "id=[REDACTED:secret]"
    finally:
        logs.forget_known_secrets()
    assert memo == {}
    assert logs.redact_short(f"id={value}") == f"id={value}"


def test_a_redaction_raced_by_a_new_secret_is_not_remembered() -> None:
    value = "Hc5nW8qT1yU4iO7pA2sD9fG6hJ3kL0zX"
    memo = logs.redaction_memo()

    def learn_meanwhile(text: str) -> str:
        # The secret arrives while the old redaction is being computed (another thread).
        logs.add_known_secret(value)
        return text

    try:
        assert logs.remember(memo, f"k={value}", learn_meanwhile) == f"k={value}"
        assert f"k={value}" not in memo
        assert logs.redact_short(f"k={value}") == "k=[REDACTED:secret]"
    finally:
        logs.forget_known_secrets()


def test_long_texts_are_redacted_but_not_remembered() -> None:
    memo = logs.redaction_memo()
    text = "x" * 200 + " " + GITHUB_TOKEN
    assert logs.remember(memo, text) == "x" * 200 + " [REDACTED:github]"
    assert memo == {}


def test_rotation_matches_the_standard_librarys(tmp_path: Path) -> None:
    """Same records, same limits: the same files with the same contents as
    ``logging.handlers.RotatingFileHandler`` leaves."""
    import logging.handlers

    made = {}
    for name, cls in (
        ("ours", PrivateRotatingFileHandler),
        ("stdlib", logging.handlers.RotatingFileHandler),
    ):
        folder = tmp_path / name
        folder.mkdir()
        handler = cls(folder / "fermix.log", maxBytes=120, backupCount=3, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger = logging.getLogger(f"fermix.test.rotation.{name}")
        logger.propagate = False
        logger.addHandler(handler)
        try:
            for i in range(40):
                logger.warning("record %02d %s", i, "x" * (i % 7) * 5)
        finally:
            logger.removeHandler(handler)
            logger.propagate = True
            handler.close()
        made[name] = {p.name: p.read_text() for p in sorted(folder.iterdir())}
    assert list(made["ours"]) == ["fermix.log", "fermix.log.1", "fermix.log.2", "fermix.log.3"]
    assert made["ours"] == made["stdlib"]


def test_a_log_that_is_not_a_regular_file_never_rotates(tmp_path: Path) -> None:
    handler = PrivateRotatingFileHandler(os.devnull, maxBytes=10, backupCount=2)
    try:
        record = logging.LogRecord("fermix.test", logging.WARNING, __file__, 1, "x" * 50, (), None)
        assert handler.shouldRollover(record) is False
        handler.emit(record)
    finally:
        handler.close()


def test_setting_up_logs_imports_no_logging_handlers(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from fermix_core.logs import setup_logging\n"
        f"setup_logging({str(tmp_path)!r}, console=False)\n"
        "import logging; logging.getLogger('fermix.x').warning('hello')\n"
        "print('logging.handlers' in sys.modules, 'pickle' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    assert "hello" in (tmp_path / "logs" / "fermix.log").read_text()
