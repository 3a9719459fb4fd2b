"""Text out of HTML (the standard library's parser) and PDF (pypdf)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from forgeml.core.errors import InvalidDataError

_SKIPPED = frozenset({"script", "style", "head", "template", "noscript"})
_BLOCKS = frozenset(
    {"p", "div", "section", "article", "li", "ul", "ol", "pre", "table", "tr", "br", "blockquote"}
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}


class _TextParser(HTMLParser):
    """Collects visible text; headings become markdown headings so chunking sees sections."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag in _HEADINGS:
            self.parts.append("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag in _BLOCKS:
            self.parts.append("\n\n" if tag != "br" else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _HEADINGS or tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_text(markup: str) -> str:
    """The visible text of an HTML page, paragraphs separated by blank lines."""
    parser = _TextParser()
    parser.feed(markup)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip()


def pdf_text(path: Path) -> str:
    """The text of every page of a PDF, pages separated by blank lines.

    Raises:
        InvalidDataError: the PDF is encrypted or cannot be parsed.
    """
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise InvalidDataError(f"'{path}' is an encrypted PDF; decrypt it before indexing.")
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, OSError) as error:
        raise InvalidDataError(f"'{path}' is not a readable PDF ({error}).") from None
    return "\n\n".join(page.strip() for page in pages if page.strip())
