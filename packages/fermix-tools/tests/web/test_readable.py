"""HTML to readable text, including the malformed and hostile markup real pages contain."""

from __future__ import annotations

import pytest
from fermix_tools.web.readable import html_to_text

BASE = "https://site.example/docs/page.html"


def text(html: str, base: str = BASE) -> str:
    return html_to_text(html, base).text


def test_headings_paragraphs_lists_and_links() -> None:
    out = text(
        "<h1>Title</h1><p>First <em>para</em>.</p><h3>Sub</h3>"
        "<ul><li>one</li><li>two</li></ul><p>See <a href='../api/'>the API</a>.</p>"
    )
    assert out == (
        "# Title\n\nFirst para.\n\n### Sub\n\n- one\n- two\n\n"
        "See the API (https://site.example/api/)."
    )


def test_links_are_absolute_and_only_followable_ones_keep_a_url() -> None:
    out = text(
        '<p><a href="/a">rel</a> <a href="https://x.example/b">abs</a> '
        '<a href="javascript:steal()">js</a> <a href="#frag">frag</a> '
        '<a href="mailto:me@example.com">mail</a> <a>no href</a> '
        '<a href="data:text/html,hi">data</a> <a href="https://x.example/c"></a></p>'
    )
    assert "rel (https://site.example/a)" in out
    assert "abs (https://x.example/b)" in out
    assert "js" in out and "steal" not in out and "javascript" not in out
    assert "frag" in out and "#frag" not in out
    assert "mail (mailto:me@example.com)" in out
    assert "data:text" not in out
    assert "https://x.example/c" in out


def test_base_href_changes_link_resolution() -> None:
    out = text('<head><base href="https://cdn.example/v2/"></head><a href="guide">g</a>')
    assert out == "g (https://cdn.example/v2/guide)"


def test_scripts_styles_comments_and_hidden_content_never_show() -> None:
    out = text(
        "<style>.x{}</style><script>var a = '</div><p>fake</p>';</script>"
        "<!-- note to self: password hunter2 --><noscript>enable js</noscript>"
        "<p hidden>hidden attr</p><p aria-hidden='true'>aria</p>"
        "<p style='display: none'>styled away</p><template><p>tpl</p></template>"
        "<svg><text>svg text</text></svg><p>visible</p>"
    )
    assert out == "visible"


def test_site_chrome_goes_but_article_headers_stay() -> None:
    out = text(
        "<header>Site banner</header><nav>Menu</nav><aside>Ads</aside>"
        "<div role='navigation'>crumbs</div>"
        "<article><header><h2>Post title</h2></header><p>Body</p>"
        "<footer>Posted Tuesday</footer></article><footer>© Site</footer>"
    )
    assert out == "## Post title\n\nBody\n\nPosted Tuesday"


def test_an_unclosed_skipped_element_ends_with_its_parent() -> None:
    out = text("<div><nav><ul><li>menu<li>more</div><p>after the broken nav</p>")
    assert out == "after the broken nav"


def test_preformatted_text_keeps_its_layout() -> None:
    out = text("<p>code:</p><pre>def f():\n    return  1\n\n\tdone</pre><p>after</p>")
    assert "def f():\n    return  1\n\n\tdone" in out


def test_tables_are_rows_of_cells() -> None:
    out = text("<table><tr><th>name</th><th>qty</th></tr><tr><td>tea</td><td>2</td></tr></table>")
    assert out == "name | qty\ntea | 2"


def test_entities_whitespace_and_title() -> None:
    readable = html_to_text(
        "<title>  A &amp; B\n title </title><p>caf&eacute;   &lt;tag&gt;\n\n spaced</p>", BASE
    )
    assert readable.title == "A & B title"
    assert readable.text == "café <tag> spaced"


def test_images_contribute_their_alt_text() -> None:
    assert text('<p><img src="x.png" alt="A diagram"> caption</p>') == "[image: A diagram] caption"


def test_a_card_link_keeps_its_label() -> None:
    out = text('<a href="/card"><h3>Card</h3><p>blurb</p></a>')
    assert out == "### Card blurb (https://site.example/card)"


@pytest.mark.parametrize(
    "html",
    [
        "",
        "<",
        "</p></div></body>",
        "<div" * 5000,
        "<p>" * 20000 + "deep",
        "<a href='" + "x" * 100_000,
        "<script>never closed",
        "\x00\x01<p>\ufffd</p>",
        "<p>" + "<b>" * 3000 + "bold" + "</b>" * 3000,
        "<svg><script>alert(1)</script></svg>text",
    ],
)
def test_malformed_markup_never_raises(html: str) -> None:
    readable = html_to_text(html, BASE)
    assert isinstance(readable.text, str)
    assert "alert(1)" not in readable.text
