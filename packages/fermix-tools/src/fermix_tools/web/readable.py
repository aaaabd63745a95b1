"""Server-rendered HTML to the text a reader would see: headings, paragraphs, lists, links.

The model pays for every character it reads, so what is not content goes: scripts, styles,
navigation, forms, hidden elements and site chrome (a page-level ``header``/``footer``/
``aside`` — the ones inside an ``article`` or ``main`` are kept). Links stay readable and
followable as ``label (url)`` with the URL made absolute, so the model can pass it straight
to ``web_fetch``. The standard library's tolerant parser is enough: this is for
server-rendered pages; anything that needs a script to show its text is the browser's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

__all__ = ["Readable", "html_to_text"]

#: Subtrees never shown. ``script``/``style`` content arrives as raw data and is dropped too.
_SKIP = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "svg",
        "math",
        "canvas",
        "iframe",
        "object",
        "embed",
        "nav",
        "form",
        "button",
        "select",
        "textarea",
        "dialog",
    }
)
#: Site chrome: skipped unless it sits inside the page's content (``article``/``main``).
_CHROME = frozenset({"header", "footer", "aside"})
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
_CONTENT = frozenset({"article", "main"})
_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
_BLOCK = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "aside",
        "blockquote",
        "table",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "figure",
        "figcaption",
        "details",
        "summary",
        "address",
        "hr",
        "br",
    }
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_SPACES = re.compile(r"[ \t\r\f\v\n]+")
_BLANK_RUNS = re.compile(r"\n{3,}")
_LINK_SCHEMES = frozenset({"http", "https", "mailto", "tel", "ftp"})
#: Private-use stand-ins for whitespace inside ``<pre>`` while the rest is normalised.
_PRE_SPACE, _PRE_TAB, _PRE_NL = "\ue000", "\ue001", "\ue002"


@dataclass(frozen=True)
class Readable:
    title: str
    text: str


class _Extractor(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.out: list[str] = []
        self.title_parts: list[str] = []
        self.open: list[str] = []  # non-void elements currently open (best effort)
        self.skipping: list[str] = []  # the skipped subtree's tag, outermost first
        self.in_title = False
        self.pre = 0
        self.link: tuple[str | None, list[str]] | None = None
        self.pending = 0  # newlines owed before the next text
        self.cells = 0  # cells seen in the current table row

    # ------------------------------------------------------------------ helpers

    def _emit(self, text: str) -> None:
        if self.link is not None:
            self.link[1].append(text)
            return
        if self.pending and text.strip():
            self.out.append("\n" * self.pending)
            self.pending = 0
        self.out.append(text)

    def _break(self, blank: bool = True) -> None:
        """Ask for a line (or paragraph) break before the next text; breaks never stack.

        Inside a link (a card whose whole body is one ``<a>``) a break is a space, so the
        link keeps its label instead of being cut off at the first block.
        """
        if self.link is not None:
            self.link[1].append(" ")
            return
        self.pending = max(self.pending, 2 if blank else 1)

    def _inside_content(self) -> bool:
        return any(tag in _CONTENT for tag in self.open)

    def _should_skip(self, tag: str, attrs: dict[str, str | None]) -> bool:
        if tag in _SKIP or "hidden" in attrs:
            return True
        if (attrs.get("aria-hidden") or "").lower() == "true":
            return True
        if "display:none" in (attrs.get("style") or "").replace(" ", "").lower():
            return True
        role = (attrs.get("role") or "").lower()
        if role == "navigation":
            return True
        return (tag in _CHROME or role in _CHROME_ROLES) and not self._inside_content()

    def _href(self, raw: str | None) -> str | None:
        if not raw:
            return None
        raw = raw.strip()
        if raw.startswith("#"):
            return None
        url = urljoin(self.base_url, raw)
        scheme = urlsplit(url).scheme.lower()
        return url if scheme in _LINK_SCHEMES else None

    def _close_link(self) -> None:
        if self.link is None:
            return
        href, parts = self.link
        self.link = None
        label = _SPACES.sub(" ", "".join(parts)).strip()
        if href and label and label != href:
            self._emit(f"{label} ({href})")
        elif href:
            self._emit(href)
        elif label:
            self._emit(label)

    # ------------------------------------------------------------------ parser callbacks

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k.lower(): v for k, v in attrs}
        if self.skipping:
            if tag not in _VOID:
                self.skipping.append(tag)
            return
        if tag == "title":
            self.in_title = True
            return
        if tag == "base" and attributes.get("href"):
            self.base_url = urljoin(self.base_url, attributes["href"] or "")
            return
        if tag not in _VOID and self._should_skip(tag, attributes):
            self.skipping.append(tag)
            return
        if tag not in _VOID:
            self.open.append(tag)
        if tag in _HEADINGS:
            self._break()
            self._emit("#" * _HEADINGS[tag] + " ")
        elif tag == "li":
            self._break(blank=False)
            self._emit("- ")
        elif tag == "tr":
            self._break(blank=False)
            self.cells = 0
        elif tag in ("td", "th"):
            if self.cells:
                self._emit(" | ")
            self.cells += 1
        elif tag == "pre":
            self._break()
            self.pre += 1
        elif tag == "br":
            self._break(blank=False)
        elif tag in _BLOCK:
            self._break()
        elif tag == "a":
            self._close_link()
            self.link = (self._href(attributes.get("href")), [])
        elif tag == "img":
            alt = (attributes.get("alt") or "").strip()
            if alt:
                self._emit(f" [image: {alt}] ")

    def handle_endtag(self, tag: str) -> None:
        if self.skipping:
            if tag == self.skipping[-1]:
                self.skipping.pop()
                return
            if tag in self.skipping:  # an unclosed child inside the skipped subtree
                del self.skipping[self.skipping.index(tag) :]
                return
            if tag not in self.open:
                return
            # An ancestor closed while the skipped element never did (<nav> left open):
            # the skipped subtree ends here rather than swallowing the rest of the page.
            self.skipping.clear()
        if tag == "title":
            self.in_title = False
            return
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag) :]
        if tag == "a":
            self._close_link()
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            self._break()
        elif tag in _HEADINGS or tag in _BLOCK or tag == "li":
            self._break(blank=tag not in ("li", "tr", "dt", "dd"))

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
            return
        if self.skipping:
            return
        if self.pre:
            # Preformatted text keeps its layout: stand-ins survive whitespace normalisation.
            self._emit(data.replace(" ", _PRE_SPACE).replace("\t", _PRE_TAB).replace("\n", _PRE_NL))
        else:
            self._emit(_SPACES.sub(" ", data))

    def finish(self) -> Readable:
        self.close()
        self._close_link()
        lines = [re.sub(r" {2,}", " ", line.strip()) for line in "".join(self.out).split("\n")]
        text = _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()
        text = text.replace(_PRE_SPACE, " ").replace(_PRE_TAB, "\t").replace(_PRE_NL, "\n")
        title = _SPACES.sub(" ", "".join(self.title_parts)).strip()
        return Readable(title=title, text=text)


def html_to_text(html: str, base_url: str = "") -> Readable:
    """The readable text and ``<title>`` of *html*; link targets resolve against *base_url*."""
    extractor = _Extractor(base_url)
    extractor.feed(html)
    return extractor.finish()
