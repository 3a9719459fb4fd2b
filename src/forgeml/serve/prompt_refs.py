"""The prompt version a generation used: the `x-forgeml-prompt: NAME@vN` request header.

The gateway sends it with every request whose prompt it rendered from the registry (its
`forgeml_prompt` body field), and sends it back to the caller with the answer; a caller
that rendered a registry prompt itself may send it too (`ChatClient.chat(prompt=...)`, as
`prompts eval` and `rag answer` do). The model server keeps a usable value, a prompt name
and a version number (`qa@v3`, or a built-in prompt's `builtin:rag-answer@1`), in that
request's request-log entry (`prompt`), and ignores any other value, as it does an unusable
`x-request-id`.
"""

from __future__ import annotations

import re

HEADER = "x-forgeml-prompt"
_HEADER_BYTES = HEADER.encode("latin-1")
# a prompt name (`forgeml.core.ids.validate_name`) and a version number; built-in prompts
# (`forgeml.rag.answer`) are named `builtin:NAME@N`
_REF = re.compile(r"^(builtin:)?[A-Za-z0-9][A-Za-z0-9._-]{0,127}@v?[1-9][0-9]{0,9}$")


def usable(value: str) -> bool:
    """Whether `value` reads `NAME@vN` (or `builtin:NAME@N`), the forms a record keeps."""
    return _REF.match(value) is not None and ".." not in value


def incoming(headers: list[tuple[bytes, bytes]]) -> str:
    """The request's usable prompt reference from its ASGI headers, or "" (none, or unusable)."""
    for key, value in headers:
        if key == _HEADER_BYTES:
            text = value.decode("latin-1")
            return text if usable(text) else ""
    return ""
