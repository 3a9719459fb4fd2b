"""Write part of the Python standard library's documentation as Markdown, with questions.

    python examples/stdlib-rag/make_docs.py /tmp/stdlib-docs

One file per module (`json.md`, ...), a `## name` section per documented object holding its
signature and docstring, and `<folder>-queries.jsonl` beside the folder (for
/tmp/stdlib-docs, /tmp/stdlib-docs-queries.jsonl): each object's first
docstring sentence as a question, its module's file as the relevant source. The first
sentence is left out of the section (forgeml.rag.labelled does the same), or finding it
would be a string match rather than retrieval.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from forgeml.rag.labelled import stdlib_set

MODULES = (
    "argparse", "bisect", "collections", "csv", "datetime", "functools", "heapq", "itertools",
    "json", "logging", "pathlib", "random", "shutil", "statistics", "string", "textwrap",
)  # fmt: skip


def main(out: Path) -> None:
    labelled = stdlib_set()
    sections: dict[str, list[str]] = defaultdict(list)
    for document in labelled.documents:
        module = document.id.split(".")[0]
        if module in MODULES:
            sections[module].append(f"## {document.id}\n\n{document.text.strip()}\n")
    out.mkdir(parents=True, exist_ok=True)
    for module, parts in sorted(sections.items()):
        (out / f"{module}.md").write_text(f"# {module}\n\n" + "\n".join(parts), encoding="utf-8")
    lines = []
    for query in labelled.queries:
        modules = {name.split(".")[0] for name in query.relevant}
        if modules <= set(sections):
            relevant = sorted(f"{module}.md" for module in modules)
            lines.append(json.dumps({"query": query.text, "relevant": relevant}))
    (out.parent / f"{out.name}-queries.jsonl").write_text("\n".join(lines) + "\n")
    print(f"{len(sections)} modules, {len(lines)} questions")  # noqa: T201  (a script)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("stdlib-docs"))
