"""Object stores and any other fsspec URL (`s3://bucket/key`, `gs://`, `az://`, ...).

The object (or every object under a prefix, for the folder formats) is copied into the
working folder under its own name, so `ingest` detects the format from the extension as it
does for a local file, and reads every format it reads locally. An object is not a live
source: the recipe records its URL, and `data rebuild` reads it again and compares the
digest. Credentials come from the environment the way the filesystem's library reads them
(`AWS_*` for S3, `FSSPEC_S3_ENDPOINT_URL` for another S3 endpoint) and are never recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forgeml.core.errors import NotFoundError, SourceError
from forgeml.data.sources.base import Fetched, SourceOptions, redact_secrets, refuse_options

# handled elsewhere: local paths by `data add` itself, web URLs by the web source (which
# checks every address against the SSRF guard)
_NOT_HERE = ("file", "local", "http", "https")
_DATABASE_OPTIONS = ("table", "query", "json_path", "next", "cursor", "allow_private")


class ObjectStoreSource:
    """A file, or a folder of files, behind an fsspec URL."""

    kind = "object store"

    def accepts(self, url: str) -> bool:
        from fsspec.registry import known_implementations, registry

        scheme = url.split("://", 1)[0].lower()
        return scheme not in _NOT_HERE and (scheme in known_implementations or scheme in registry)

    def fetch(self, url: str, options: SourceOptions, workdir: Path) -> Fetched:
        refuse_options(self.kind, options, _DATABASE_OPTIONS)
        fs, path = _filesystem(url)
        try:
            if not fs.exists(path):
                raise NotFoundError(f"{url} does not exist; check the bucket and key.")
            local = workdir / (Path(path.rstrip("/")).name or "object")
            if fs.isdir(path):
                fs.get(path.rstrip("/") + "/", str(local), recursive=True)
            else:
                fs.get_file(path, str(local))
        except (NotFoundError, SourceError):
            raise
        except FileNotFoundError:
            raise NotFoundError(f"{url} does not exist; check the bucket and key.") from None
        except PermissionError as exc:
            raise SourceError(f"Reading {url} was refused ({_first_line(exc)}).") from None
        except OSError as exc:
            raise SourceError(f"Cannot read {url} ({_first_line(exc)}).") from None
        return Fetched(raw=local, format="auto", live=False, params={})

    def recorded_url(self, url: str) -> str:
        return redact_secrets(url)

    def readable(self, fetched: Fetched, workdir: Path) -> Path:
        return fetched.raw


def _filesystem(url: str) -> tuple[Any, str]:
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as exc:
        raise SourceError(
            f"Reading {url.split('://', 1)[0]}:// URLs needs a package that is not installed "
            f"({_first_line(exc)})."
        ) from None
    except (ValueError, OSError) as exc:
        raise SourceError(f"Cannot open {url} ({_first_line(exc)}).") from None
    return fs, str(path)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
