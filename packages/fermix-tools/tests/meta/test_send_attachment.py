"""``send_attachment`` with real files, a real channel reply port and an injected clock."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fermix_core.channel import AttachmentKind, ChannelError, ConversationKey
from fermix_core.gateway.reply import ChannelReplyPort
from fermix_core.testing import MemoryChannel, ToolContract
from fermix_core.tool import ToolContext, ToolError, build_tool
from fermix_tools.meta.plugin import SEND_ATTACHMENT
from fermix_tools.meta.send_attachment import SendAttachment, kind_for

pytestmark = pytest.mark.anyio


class OutsideRoots(ToolError):
    """What a sandbox refusal looks like to a tool: a ToolError that says what to do."""


class RootPolicy:
    """A stand-in for the sandbox policy: one root, canonical paths, symlinks resolved.

    Unit tests use it so the tool's own behaviour is checked without depending on every
    rule of the real policy; ``resolve`` keeps the contract (canonical path or a
    ToolError, checked before any I/O).
    """

    def __init__(self, root: Path, *, canonicalize: bool = True) -> None:
        self.root = root.resolve()
        self.canonicalize = canonicalize
        self.calls: list[tuple[str, bool]] = []

    def resolve(self, path: str | Path, ctx: ToolContext, *, write: bool = False) -> Path:
        self.calls.append((str(path), write))
        candidate = Path(os.path.expanduser(str(path)))
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = candidate.resolve()
        if not real.is_relative_to(self.root):
            raise OutsideRoots(
                f"{real} is outside the sandbox; ask the owner to run /sandbox grant {real.parent}"
            )
        return real if self.canonicalize else candidate


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, data: bytes = b"hello report\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tool(clock: Clock) -> SendAttachment:
    return SendAttachment(SEND_ATTACHMENT, clock=clock)


@pytest.fixture
def services(workspace: Path, running: MemoryChannel) -> dict[str, Any]:
    return {"sandbox": RootPolicy(workspace), "reply": ChannelReplyPort(running)}


class TestSendAttachmentContract(ToolContract):
    valid_args: ClassVar[dict[str, Any]] = {"path": "https://example.com/a.png"}
    valid_output_is_error: ClassVar[bool] = True  # URLs are refused before anything else
    invalid_args: ClassVar[dict[str, Any]] = {"path": "", "kind": "sticker"}
    invalid_field: ClassVar[str] = "path"

    def make_tool(self) -> SendAttachment:
        return build_tool(SEND_ATTACHMENT)  # type: ignore[return-value]


async def test_sends_a_file_with_kind_from_its_type(
    tool, services, running, workspace, make_context
) -> None:
    path = write(workspace / "charts" / "sales.png", PNG)
    out = await tool.invoke(
        {"path": "charts/sales.png", "caption": "Q3 sales"}, make_context(services=services)
    )
    assert not out.is_error, out.text
    (message,) = running.sent
    (attachment,) = message.attachments
    assert message.chat_id == "chat" and message.text == ""
    assert attachment.kind is AttachmentKind.IMAGE
    assert attachment.path == path.resolve() and attachment.data is None
    assert attachment.filename == "sales.png" and attachment.mime_type == "image/png"
    assert attachment.caption == "Q3 sales" and attachment.size == len(PNG)
    assert out.data["sha256"] == hashlib.sha256(PNG).hexdigest()
    assert out.data["sent"] is True and out.data["message_id"] == "m1"
    assert services["sandbox"].calls == [("charts/sales.png", False)]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("a.pdf", "document"),
        ("b.mp3", "audio"),
        ("c.mp4", "video"),
        ("d.jpg", "image"),
        ("e", "document"),
    ],
)
async def test_kind_follows_the_mime_type(
    tool, services, running, workspace, make_context, name, kind
) -> None:
    write(workspace / name)
    out = await tool.invoke({"path": name}, make_context(services=services))
    assert not out.is_error, out.text
    assert running.sent[-1].attachments[0].kind.value == kind


async def test_an_image_may_go_as_a_document_but_not_a_pdf_as_an_image(
    tool, services, running, workspace, make_context
) -> None:
    write(workspace / "photo.png", PNG)
    write(workspace / "paper.pdf")
    ctx = make_context(services=services)
    as_doc = await tool.invoke({"path": "photo.png", "kind": "document"}, ctx)
    assert not as_doc.is_error and running.sent[-1].attachments[0].kind is AttachmentKind.DOCUMENT
    wrong = await tool.invoke({"path": "paper.pdf", "kind": "image"}, ctx)
    assert wrong.is_error and "application/pdf" in wrong.text and "kind='document'" in wrong.text
    assert len(running.sent) == 1


async def test_duplicate_sends_within_sixty_seconds_are_skipped(
    tool, clock, services, running, workspace, make_context
) -> None:
    write(workspace / "report.txt")
    ctx = make_context(services=services)
    first = await tool.invoke({"path": "report.txt", "caption": "weekly"}, ctx)
    clock.now += 59.0
    again = await tool.invoke({"path": str(workspace / "report.txt"), "caption": " weekly "}, ctx)
    assert first.data["sent"] is True
    assert not again.is_error and again.data == {**again.data, "sent": False, "duplicate": True}
    assert "already sent" in again.text
    assert len(running.sent) == 1
    clock.now += 2.0  # 61 s after the first send
    later = await tool.invoke({"path": "report.txt", "caption": "weekly"}, ctx)
    assert later.data["sent"] is True and len(running.sent) == 2


async def test_anything_in_the_key_changing_makes_it_a_new_send(
    tool, services, running, workspace, make_context
) -> None:
    path = write(workspace / "report.txt", b"v1")
    ctx = make_context(services=services)
    await tool.invoke({"path": "report.txt"}, ctx)
    other_caption = await tool.invoke({"path": "report.txt", "caption": "new"}, ctx)
    path.write_bytes(b"v2")
    new_content = await tool.invoke({"path": "report.txt", "caption": "new"}, ctx)
    as_document = await tool.invoke(
        {"path": "report.txt", "caption": "new", "kind": "document"}, ctx
    )
    other_chat = await tool.invoke(
        {"path": "report.txt", "caption": "new"},
        make_context(
            services=services, conversation_key=ConversationKey("memory", "other-chat", None)
        ),
    )
    assert [o.data["sent"] for o in (other_caption, new_content, other_chat)] == [True] * 3
    assert as_document.data["duplicate"] is True, "document is already the natural kind here"
    assert [m.chat_id for m in running.sent] == ["chat", "chat", "chat", "other-chat"]


async def test_a_failed_send_is_not_remembered(
    tool, services, running, workspace, make_context
) -> None:
    write(workspace / "report.txt")
    ctx = make_context(services=services)
    running.fail_next(ChannelError("file too large for this platform"))
    failed = await tool.invoke({"path": "report.txt"}, ctx)
    assert failed.is_error and "file too large for this platform" in failed.text
    retried = await tool.invoke({"path": "report.txt"}, ctx)
    assert retried.data["sent"] is True and len(running.sent) == 1


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/cat.png",
        "http://127.0.0.1/x",
        "file:///etc/passwd",
        "data:image/png;base64,AAAA",
        "ftp://host/file",
        "s3://bucket/key",
    ],
)
async def test_urls_are_rejected(tool, services, running, make_context, url) -> None:
    out = await tool.invoke({"path": url}, make_context(services=services))
    assert out.is_error and "local files only" in out.text
    assert services["sandbox"].calls == [] and running.sent == []


@pytest.mark.parametrize("raw", ["../outside.txt", "/etc/hostname", "link-out.txt"])
async def test_paths_outside_the_sandbox_are_refused_before_any_read(
    tool, services, running, workspace, tmp_path, make_context, raw
) -> None:
    secret = write(tmp_path / "outside.txt", b"private")
    (workspace / "link-out.txt").symlink_to(secret)
    out = await tool.invoke({"path": raw}, make_context(services=services))
    assert out.is_error and "/sandbox grant" in out.text
    assert running.sent == []


async def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    services, running, workspace, tmp_path, clock, make_context
) -> None:
    secret = write(tmp_path / "secret.txt", b"private")
    (workspace / "note.txt").symlink_to(secret)
    naive = {**services, "sandbox": RootPolicy(tmp_path, canonicalize=False)}
    tool = SendAttachment(SEND_ATTACHMENT, clock=clock)
    out = await tool.invoke({"path": str(workspace / "note.txt")}, make_context(services=naive))
    assert out.is_error and "Cannot open" in out.text
    assert running.sent == []


@pytest.mark.parametrize(
    ("setup", "phrase"),
    [
        ("missing", "No file at"),
        ("directory", "is a directory"),
        ("empty", "is empty"),
        ("fifo", "not a regular file"),
        ("huge", "the cap is"),
    ],
)
async def test_unsendable_files_explain_themselves(
    services, running, workspace, clock, make_context, setup, phrase
) -> None:
    target = workspace / "thing"
    if setup == "directory":
        target.mkdir()
    elif setup == "empty":
        target.write_bytes(b"")
    elif setup == "fifo":
        os.mkfifo(target)
    elif setup == "huge":
        target.write_bytes(b"x" * 2048)
    tool = SendAttachment(SEND_ATTACHMENT, clock=clock, max_bytes=1024)
    out = await tool.invoke({"path": "thing"}, make_context(services=services))
    assert out.is_error and phrase in out.text, out.text
    assert running.sent == []


async def test_without_a_sandbox_or_a_chat_nothing_is_sent(
    tool, running, workspace, make_context
) -> None:
    write(workspace / "report.txt")
    port = ChannelReplyPort(running)
    no_sandbox = await tool.invoke({"path": "report.txt"}, make_context(services={"reply": port}))
    assert no_sandbox.is_error and "sandbox" in no_sandbox.text
    no_reply = await tool.invoke(
        {"path": "report.txt"}, make_context(services={"sandbox": RootPolicy(workspace)})
    )
    assert no_reply.is_error and "reply is not available" in no_reply.text
    no_chat = await tool.invoke(
        {"path": "report.txt"},
        make_context(
            services={"sandbox": RootPolicy(workspace), "reply": port}, conversation_key=None
        ),
    )
    assert no_chat.is_error and "no chat" in no_chat.text
    assert running.sent == []


async def test_hostile_file_names_go_out_as_plain_names(
    tool, services, running, workspace, make_context
) -> None:
    name = "report\n\u202egnp.exe 'quoted' ünïcode.txt"
    write(workspace / name)
    out = await tool.invoke({"path": name}, make_context(services=services))
    assert not out.is_error, out.text
    assert running.sent[0].attachments[0].filename == name


def test_kind_for_mime_types() -> None:
    assert kind_for("image/webp") is AttachmentKind.IMAGE
    assert kind_for("audio/ogg") is AttachmentKind.AUDIO
    assert kind_for("video/quicktime") is AttachmentKind.VIDEO
    assert kind_for("application/zip") is AttachmentKind.DOCUMENT
    assert kind_for("text/plain") is AttachmentKind.DOCUMENT


async def test_with_the_real_sandbox_policy(tmp_path, fermix_home, running, make_context) -> None:
    sandbox = pytest.importorskip("fermix_core.sandbox")
    if not hasattr(sandbox, "SandboxPolicy"):
        pytest.skip("fermix_core.sandbox does not export SandboxPolicy yet")
    from fermix_core.config import load_config
    from fermix_core.plugins import PluginHost

    registry = PluginHost().collect()
    fermix_home.config_file.write_text('[sandbox]\nmode = "strict"\n')
    loaded = load_config(fermix_home, registry, environ={})
    policy = sandbox.SandboxPolicy.from_config(loaded, fermix_home.path, os_home=tmp_path)
    workspace = Path(policy.workspace)
    workspace.mkdir(parents=True, exist_ok=True)
    write(workspace / "out.txt")
    ctx = make_context(
        services={"sandbox": policy, "reply": ChannelReplyPort(running)}, cwd=workspace
    )
    tool = SendAttachment(SEND_ATTACHMENT)
    sent = await tool.invoke({"path": str(workspace / "out.txt")}, ctx)
    assert not sent.is_error, sent.text
    config = await tool.invoke({"path": str(fermix_home.config_file)}, ctx)
    assert config.is_error, "Fermix internals are protected in every mode"
    assert len(running.sent) == 1
