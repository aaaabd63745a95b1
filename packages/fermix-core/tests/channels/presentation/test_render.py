"""Each dialect's rendering of the same Markdown, by example."""

from __future__ import annotations

import pytest
from fermix_core.channels.presentation import Dialect, present
from fermix_core.channels.presentation.ir import BlockKind, SpanKind
from fermix_core.channels.presentation.parse import parse
from fermix_core.channels.presentation.render import SlackRenderer


def one(markdown: str, dialect: Dialect) -> str:
    result = present(markdown, dialect)
    assert len(result.chunks) == 1
    return result.chunks[0].text


# ---- the intermediate form ----------------------------------------------------------------


def test_parse_gives_flat_blocks_with_nesting_carried_on_each() -> None:
    blocks = parse(
        "# T\n\ntext\n\n- a\n- b\n  1. c\n\n> q\n\n| x |\n|---|\n| 1 |\n\n```py\nx\n```\n\n---"
    )
    kinds = [b.kind for b in blocks]
    assert kinds == [
        BlockKind.HEADING,
        BlockKind.PARAGRAPH,
        BlockKind.PARAGRAPH,
        BlockKind.PARAGRAPH,
        BlockKind.PARAGRAPH,
        BlockKind.PARAGRAPH,
        BlockKind.TABLE,
        BlockKind.CODE,
        BlockKind.RULE,
    ]
    a, b, c, q = blocks[2:6]
    assert (a.depth, a.marker, a.gap) == (1, "-", True)
    assert (b.depth, b.marker, b.gap) == (1, "-", False)
    assert (c.depth, c.marker, c.gap) == (2, "1.", False)
    assert q.quote == 1
    assert blocks[7].language == "py"
    assert blocks[7].code == "x\n"


def test_raw_html_is_text_and_unsafe_link_targets_stay_literal() -> None:
    assert one("<b>x</b> [a](javascript:alert(1))", Dialect.TELEGRAM) == (
        "&lt;b&gt;x&lt;/b&gt; [a](javascript:alert(1))"
    )


# ---- Telegram ------------------------------------------------------------------------------


def test_telegram_html() -> None:
    text = one(
        "## Plan\n\n**bold** _it_ ~~gone~~ `a<b` [site](https://example.com/?a=1&b=2) 1 < 2 & 3",
        Dialect.TELEGRAM,
    )
    assert text == (
        "<b>Plan</b>\n\n<b>bold</b> <i>it</i> <s>gone</s> <code>a&lt;b</code> "
        '<a href="https://example.com/?a=1&amp;b=2">site</a> 1 &lt; 2 &amp; 3'
    )


def test_telegram_code_blocks_tables_and_quotes() -> None:
    assert one("```python\nif a < b:\n    pass\n```", Dialect.TELEGRAM) == (
        '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>'
    )
    assert one("```\nplain\n```", Dialect.TELEGRAM) == "<pre>plain</pre>"
    table = one("| name | n |\n|:--|--:|\n| apple | 3 |\n| kiwi | 12 |", Dialect.TELEGRAM)
    assert table == "<pre>name  |  n\n------+---\napple |  3\nkiwi  | 12</pre>"
    assert one("> short", Dialect.TELEGRAM) == "<blockquote>short</blockquote>"
    long_quote = one("> " + "word " * 80, Dialect.TELEGRAM)
    assert long_quote.startswith("<blockquote expandable>")
    assert long_quote.endswith("</blockquote>")


def test_telegram_nested_quotes_and_lists() -> None:
    text = one("> outer\n>\n> > inner\n\n- one\n  - two\n\n3. three\n4. four", Dialect.TELEGRAM)
    assert text == (
        "<blockquote>outer\n\ninner</blockquote>\n\n• one\n  ◦ two\n\n3. three\n4. four"
    )


def test_telegram_follows_the_bot_api_nesting_rules() -> None:
    # No entity may contain code, and a quote may not contain a pre block.
    assert one("## Use `f()` now", Dialect.TELEGRAM) == "<b>Use f() now</b>"
    assert one("[`x`](https://e.com) **a `b`** `c`", Dialect.TELEGRAM) == (
        '<a href="https://e.com">x</a> <b>a b</b> <code>c</code>'
    )
    assert one("> quote\n>\n> ```\n> code\n> ```\n>\n> after", Dialect.TELEGRAM) == (
        "<blockquote>quote</blockquote>\n\n<pre>code</pre>\n\n<blockquote>after</blockquote>"
    )


# ---- Slack ---------------------------------------------------------------------------------


def test_slack_mrkdwn() -> None:
    text = one(
        "# Title\n\n**bold** *it* ~~gone~~ `x` [site](https://e.com/a|b) <https://e.com> a & b < c",
        Dialect.SLACK,
    )
    assert text == (
        "*Title*\n\n*bold* _it_ ~gone~ `x` <https://e.com/a%7Cb|site> <https://e.com> "
        "a &amp; b &lt; c"
    )


def test_slack_markers_never_wrap_edge_spaces_and_tables_are_monospace() -> None:
    # Edge spaces appear when a cut splits a styled run; the markers move inside them.
    assert SlackRenderer().style(SpanKind.BOLD, " bold ") == " *bold* "
    assert one("| a | b |\n|---|---|\n| 1 | 2 |", Dialect.SLACK) == "```\na | b\n--+--\n1 | 2\n```"
    assert one("```\nx > 1 && y\n```", Dialect.SLACK) == "```\nx &gt; 1 &amp;&amp; y\n```"


# ---- WhatsApp ------------------------------------------------------------------------------


def test_whatsapp_styles_and_links_as_label_and_url() -> None:
    text = one(
        "**bold** _it_ ~~gone~~ [docs](https://e.com/d) <https://e.com> `c`\n\n```\nmono\n```",
        Dialect.WHATSAPP,
    )
    assert text == "*bold* _it_ ~gone~ docs: https://e.com/d https://e.com `c`\n\n```mono```"


def test_whatsapp_heading_is_bold_and_nested_bold_is_not_doubled() -> None:
    assert one("## A **b** c", Dialect.WHATSAPP) == "*A b c*"


# ---- Discord -------------------------------------------------------------------------------


def test_discord_markdown_passes_through_normalized() -> None:
    text = one(
        "# T\n\n#### deep\n\n**b** *i* ~~s~~ `c` [l](https://e.com) <https://e.com/x_y>\n\n"
        "```py\nx = 1\n```",
        Dialect.DISCORD,
    )
    assert text == (
        "# T\n\n**deep**\n\n**b** *i* ~~s~~ `c` [l](<https://e.com>) <https://e.com/x_y>\n\n"
        "```py\nx = 1\n```"
    )


def test_discord_escapes_literal_markers_but_not_urls() -> None:
    assert one(r"2\*3\*4 snake_case https://e.com/a_b_c", Dialect.DISCORD) == (
        r"2\*3\*4 snake\_case https://e.com/a_b_c"
    )
    assert one(r"\# not a heading", Dialect.DISCORD) == r"\# not a heading"
    assert one("```\na ``` b\n```", Dialect.DISCORD) == "```\na `\u200b`\u200b` b\n```"


@pytest.mark.parametrize("dialect", [Dialect.SLACK, Dialect.WHATSAPP, Dialect.DISCORD])
@pytest.mark.parametrize("run", range(3, 10))
def test_no_backtick_run_leaves_three_together(dialect: Dialect, run: int) -> None:
    # Replacing each ``` alone once left one behind in a run of five (or eight): the
    # replacement's last backtick joined the two after it, and the chunk's fence was open.
    ticks = "`" * run
    for markdown in (f"0{ticks}", f"```\na {ticks} b\n```"):
        text = one(markdown, dialect)
        inner = text.removeprefix("```").removesuffix("```")
        assert "```" not in inner, (markdown, text)
        assert inner.replace("\u200b", "").count("`") >= run, (markdown, text)


def test_discord_tables_become_code_blocks() -> None:
    assert one("| a |\n|---|\n| 1 |", Dialect.DISCORD) == "```\na\n-\n1\n```"


# ---- Signal and plain ----------------------------------------------------------------------


@pytest.mark.parametrize("dialect", [Dialect.SIGNAL, Dialect.PLAIN])
def test_plain_text_removes_markers_and_indents_code(dialect: Dialect) -> None:
    text = one(
        "## Head\n\n**b** _i_ ~~s~~ `c` [docs](https://e.com) <https://e.com/x>\n\n"
        "```py\ndef f():\n    return 1\n```\n\n> quoted\n\n| a | b |\n|---|---|\n| 1 | 2 |",
        dialect,
    )
    assert text == (
        "Head\n\nb i s c docs: https://e.com https://e.com/x\n\n"
        "    def f():\n        return 1\n\n│ quoted\n\na | b\n1 | 2"
    )


def test_every_chunk_carries_its_plain_fallback() -> None:
    result = present("**bold** [l](https://e.com)", Dialect.TELEGRAM)
    chunk = result.chunks[0]
    assert chunk.text == '<b>bold</b> <a href="https://e.com">l</a>'
    assert chunk.plain == "bold l: https://e.com"
    assert chunk.formatted and chunk.notify
    signal = present("**bold**", Dialect.SIGNAL).chunks[0]
    assert not signal.formatted


def test_blank_input_gives_no_chunks() -> None:
    assert present("", Dialect.TELEGRAM).chunks == []
    assert present(" \n\n\t", Dialect.SLACK).chunks == []


def test_unknown_dialect_and_tiny_limit_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown dialect 'matrix'"):
        present("x", "matrix")
    with pytest.raises(ValueError, match="at least 64"):
        present("x", Dialect.TELEGRAM, limit=10)


def test_a_chunk_becomes_the_channel_contracts_outbound_message() -> None:
    first, second = present("**a** " * 30, Dialect.TELEGRAM, limit=64).chunks[:2]
    message = first.outbound("42", thread_id="t", reply_to="m1")
    assert (message.text, message.plain, message.silent) == (first.text, False, False)
    assert (message.chat_id, message.thread_id, message.reply_to) == ("42", "t", "m1")
    fallback = second.outbound("42", as_plain=True)
    assert (fallback.text, fallback.plain, fallback.silent) == (second.plain, True, True)
    signal = present("**a**", Dialect.SIGNAL).chunks[0].outbound("+1555")
    assert signal.plain and signal.text == "a"


def test_the_model_cannot_ping_a_whole_server_or_workspace() -> None:
    discord = one("hi @everyone and @here, see <@123> in <#9>", Dialect.DISCORD)
    assert "@everyone" not in discord and "@here" not in discord
    assert discord.endswith("see \\<@123> in \\<#9>")
    slack = one("hi <!channel> <!here> <@U123>", Dialect.SLACK)
    assert slack == "hi &lt;!channel&gt; &lt;!here&gt; &lt;@U123&gt;"
