from __future__ import annotations

import json
from pathlib import Path

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from forgeml.core.errors import InvalidDataError, MissingColumnError, NotFoundError
from forgeml.core.workspace import Workspace
from forgeml.rag.sources import load_source
from tests.conftest import CliResult

PDF_SENTENCE = "The bisect module keeps a list sorted without sorting it again."


def write_pdf(path: Path, sentence: str = PDF_SENTENCE, password: str | None = None) -> Path:
    """A one-page PDF whose page draws `sentence` in Helvetica."""
    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    fonts = DictionaryObject({NameObject("/F1"): writer._add_object(font)})
    page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
    content = DecodedStreamObject()
    content.set_data(f"BT /F1 12 Tf 72 720 Td ({sentence}) Tj ET".encode())
    page[NameObject("/Contents")] = writer._add_object(content)
    if password is not None:
        writer.encrypt(password, algorithm="AES-128")
    writer.write(path)
    return path


def test_text_and_markdown_files_are_read_as_they_are(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("plain words", encoding="utf-8")
    (tmp_path / "b.md").write_text("# Title\n\nbody", encoding="utf-8")
    txt = load_source(str(tmp_path / "a.txt"))
    md = load_source(str(tmp_path / "b.md"))
    assert (txt.kind, txt.documents[0].text, txt.documents[0].format) == (
        "file",
        "plain words",
        "txt",
    )
    assert (md.documents[0].text, md.documents[0].format) == ("# Title\n\nbody", "md")
    # a file's document is named by the file's name, its source by its full path
    assert md.documents[0].source == "b.md" and md.spec == str((tmp_path / "b.md").resolve())
    whole = load_source(str(tmp_path / "b.md"), full_paths=True)
    assert whole.documents[0].source == str((tmp_path / "b.md").resolve())


def test_html_keeps_visible_text_and_headings(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text(
        "<html><head><title>t</title><style>p{}</style></head><body><h1>heapq</h1>"
        "<p>Heap <b>queue</b> algorithm.</p><script>alert(1)</script><h2>heappush</h2>"
        "<p>Push &amp; keep the invariant.</p></body></html>",
        encoding="utf-8",
    )
    text = load_source(str(page)).documents[0].text
    assert text == "# heapq\n\nHeap queue algorithm.\n\n## heappush\n\nPush & keep the invariant."


def test_a_pdf_is_read_page_by_page(tmp_path: Path) -> None:
    document = load_source(str(write_pdf(tmp_path / "doc.pdf"))).documents[0]
    assert (document.text, document.format) == (PDF_SENTENCE, "pdf")


def test_an_encrypted_pdf_is_one_sentence(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "locked.pdf", password="secret")
    with pytest.raises(InvalidDataError, match=r"is an encrypted PDF; decrypt it"):
        load_source(str(path))


def test_a_file_that_is_not_a_pdf_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"this is not a PDF at all")
    with pytest.raises(InvalidDataError, match=r"is not a readable PDF"):
        load_source(str(path))


def test_a_folder_is_read_recursively_by_extension(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.md").write_text("a", encoding="utf-8")
    (tmp_path / "sub" / "b.txt").write_text("b", encoding="utf-8")
    (tmp_path / "sub" / "c.bin").write_bytes(b"\x00")
    loaded = load_source(str(tmp_path))
    assert loaded.kind == "folder"
    assert [Path(d.source).name for d in loaded.documents] == ["a.md", "b.txt"]


def test_the_digest_changes_with_the_content(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("one", encoding="utf-8")
    first = load_source(str(path))
    path.write_text("two", encoding="utf-8")
    assert load_source(str(path)).digest != first.digest


def test_a_missing_source_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"^The source '.*nowhere' does not exist"):
        load_source(str(tmp_path / "nowhere"))


def test_an_unknown_file_format_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "a.docx"
    path.write_bytes(b"PK")
    with pytest.raises(InvalidDataError, match=r"is not a format a source reads"):
        load_source(str(path))


def test_a_dataset_column_gives_one_document_per_row(cli: object, tmp_path: Path) -> None:
    rows = [
        {"name": "bisect", "doc": "Bisection algorithms.", "stars": 3},
        {"name": "empty", "doc": "  ", "stars": 0},
        {"name": "heapq", "doc": "Heap queue algorithm.", "stars": 5},
    ]
    data = tmp_path / "modules.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    result: CliResult = cli("data", "add", "modules", data)  # type: ignore[operator]
    assert result.code == 0, result.stderr
    from forgeml.core.config import get_settings

    workspace = Workspace(get_settings())
    try:
        loaded = load_source("dataset:modules@v1:doc", workspace)
        with pytest.raises(MissingColumnError, match=r"has no column 'text'"):
            load_source("dataset:modules@v1:text", workspace)
    finally:
        workspace.close()
    assert [d.source for d in loaded.documents] == [
        "dataset:modules:doc#0",
        "dataset:modules:doc#2",
    ]
    assert loaded.documents[1].metadata == {"name": "heapq", "stars": 5}
    assert loaded.documents[1].text == "Heap queue algorithm."
