"""Title, visible text and links of an HTML page, with the standard library's parser.

No extraction library is installed in forgeml's environment (trafilatura, selectolax and
BeautifulSoup were checked), and one page's title, text and links are what a crawl row
needs, so `html.parser` does it: text outside `script`, `style`, `noscript`, `template`
and `head`, one line per block element, whitespace collapsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_HIDDEN = frozenset({"script", "style", "noscript", "template", "head", "svg"})
_BLOCKS = frozenset(
    {
        "p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr",
        "table", "section", "article", "header", "footer", "nav", "blockquote", "pre",
        "title", "dt", "dd", "hr", "main", "aside", "figcaption",
    }
)  # fmt: skip
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


@dataclass
class Page:
    """What a crawl keeps of one page."""

    title: str
    text: str
    links: list[str] = field(default_factory=list)


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hidden = 0
        self.in_title = False
        self.title: list[str] = []
        self.parts: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self.hidden += 1
        if tag == "title":
            self.in_title = True
        if tag in _BLOCKS:
            self.parts.append("\n")
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.links.append(href.strip())

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN and self.hidden:
            self.hidden -= 1
        if tag == "title":
            self.in_title = False
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.hidden:
            self.parts.append(data)


def extract(html: str) -> Page:
    """The page's title, visible text (one line per block) and raw `href`s in order."""
    parser = _Extractor()
    parser.feed(html)
    parser.close()
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = "\n".join(line for line in lines if line)
    title = _SPACES.sub(" ", " ".join("".join(parser.title).split())).strip()
    return Page(title=title, text=text, links=parser.links)
