"""The one hierarchy of errors a user can cause.

The CLI maps every `ForgemlError` to one sentence on stderr and `exit_code`; the API
(later) maps `http_status` the same way. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class ForgemlError(Exception):
    """Base of every error a user can cause. The message is one clear sentence."""

    exit_code: int = 1
    http_status: int = 400


class UsageError(ForgemlError):
    """The command line itself is wrong (unknown flag value, bad combination)."""

    exit_code = 2


class NotFoundError(ForgemlError):
    """A named object (dataset, version, spec, event) does not exist."""

    http_status = 404


class InvalidNameError(ForgemlError):
    """A name would escape the store or is not a plain identifier."""


class ConfigError(ForgemlError):
    """A YAML config or recipe is invalid; the message names the file, key path and expectation."""

    http_status = 422


class InvalidRequestError(ForgemlError):
    """An API request's body parses but asks for something contradictory or empty."""

    http_status = 422


class InvalidDataError(ForgemlError):
    """Input data cannot be read: unknown format, empty file, undecodable text, bad rows."""

    http_status = 422


class BadRowsError(InvalidDataError):
    """Malformed rows were found and `--on-bad-rows fail` was chosen."""

    def __init__(self, message: str, line_numbers: list[int]) -> None:
        super().__init__(message)
        self.line_numbers = line_numbers


class MissingColumnError(InvalidDataError):
    """A recipe, spec or expectation names a column the data does not have."""


class UnsafeArchiveError(InvalidDataError):
    """An archive holds a link, a device or a member that would land outside its folder
    (ClearML CVE-2025-8917, tarfile's CVE-2007-4559): a request that must not be served."""

    http_status = 400


class UnsafeUrlError(ForgemlError):
    """A URL the server was asked to fetch fails the SSRF rules (`forgeml.core.netguard`)."""

    http_status = 400


class SourceError(ForgemlError):
    """A data source cannot be read: an unreachable host, a refused login, a missing table,
    bucket or page, an answer over the size limit, a robots.txt that forbids the URL."""

    http_status = 502


class QueryNotAllowedError(ForgemlError):
    """A `data query` tried to write, or to read outside the store."""

    http_status = 403


class QueryError(ForgemlError):
    """A `data query` statement does not parse or fails to run."""


class AlreadyExistsError(ForgemlError):
    """An object of that name exists already (a queue, ...)."""

    http_status = 409


class InvalidJobError(ForgemlError):
    """A job cannot be accepted: a bad spec, or a request the cluster or queue can never fit."""

    http_status = 422


class JobStateError(ForgemlError):
    """The job is not in a state that allows this (cancel a finished job, retry a running one)."""

    http_status = 409


class IntegrityError(ForgemlError):
    """Stored content does not match its digest, or a rebuild did not reproduce a version."""

    http_status = 500


class ConstraintFailedError(ForgemlError):
    """A reply decoded under a JSON schema finished yet does not match it: the decoder's
    fault, never the request's (500)."""

    http_status = 500


class AuditChainBrokenError(IntegrityError):
    """The audit log's hash chain does not verify (409: the store is in a state the
    request cannot vouch for; not the server's fault)."""

    http_status = 409

    def __init__(self, message: str, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class AuthenticationError(ForgemlError):
    """A request carries no API key, or one that is unknown or revoked."""

    http_status = 401


class PermissionDeniedError(ForgemlError):
    """The API key is valid but not scoped to what it asked for."""

    http_status = 403


class OtherProjectError(PermissionDeniedError):
    """A resource of one project is used from another: a gateway request, an agent, `rag
    answer` or a command job acting in a project that does not hold the prompt or index
    it names."""


class LastOwnerError(ForgemlError):
    """A change would leave a project without an enabled owner (nobody could manage it)."""

    http_status = 409


class PayloadTooLargeError(ForgemlError):
    """A request body is over the configured size limit."""

    http_status = 413


class RateLimitedError(ForgemlError):
    """A key is over its rate limit or quota; `retry_after` is the seconds to wait."""

    http_status = 429

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServiceUnavailableError(ForgemlError):
    """A model or deployment is not ready, or every replica failed or is cut off by its breaker."""

    http_status = 503


class ColdStartTimeoutError(ServiceUnavailableError):
    """A deployment scaled to zero had no replica ready within the wait; `retry_after` is
    the seconds after which a retry may find one."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OptimizationError(ForgemlError):
    """An optimised model does not match its parent within tolerance, or cannot be exported."""


class KeyStateError(ForgemlError):
    """The API key is not in a state that allows this (revoke a revoked key)."""

    http_status = 409


class BadGatewayError(ForgemlError):
    """A replica broke the connection or the protocol mid-answer."""

    http_status = 502


class UpstreamTimeoutError(ForgemlError):
    """A replica did not answer within the gateway's timeout."""

    http_status = 504


class CommandFailedError(ForgemlError):
    """A command a job runs (a pipeline's command step) exited non-zero or could not start."""


class EmptyWindowError(InvalidDataError):
    """Drift was asked to compare a window (or a reference) that holds no rows."""


class GateRejectedError(ForgemlError):
    """A release gate found that the challenger does not beat the champion."""


class CanaryRolledBackError(ForgemlError):
    """A canary broke a bound of its policy (or got too little traffic) and was rolled back."""


class GeneratorError(BadGatewayError):
    """A language-model endpoint (forgeml's own or a user's OpenAI-compatible one) failed."""


class PromptRequestError(ForgemlError):
    """A request's registry prompt field is malformed, or its variables do not fit the prompt."""

    http_status = 400


class PromptTemplateError(ConfigError):
    """A prompt template does not parse, reaches for Python internals, or renders too much."""


class StreamError(ForgemlError):
    """A stream broker cannot be reached, refuses the subscription, or sent a bad message."""

    http_status = 502


class InvalidLabelError(InvalidDataError):
    """A label is outside its task's schema (an unknown class, a span past the text)."""


class LabelStateError(ForgemlError):
    """A labelling step that the item's state forbids (leased to another annotator, already
    labelled by this one, not assigned to the task)."""

    http_status = 409


def _code_of(cls: type[ForgemlError]) -> str:
    name = cls.__name__.removesuffix("Error")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


# the one table of machine-readable codes: the API's `{"error", "code"}` answers carry one,
# and the client raises its class again (409 alone could be a name taken, a job's or key's
# state, or the last owner), so the CLI's remote mode exits as the local one does
ERROR_CODES: dict[str, type[ForgemlError]] = {
    _code_of(cls): cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, ForgemlError)
}


def error_code(error: ForgemlError) -> str:
    """The code of `error`: that of its nearest class in this module (`usage`,
    `last_owner`, ...); a domain package's own subclass answers as its base here."""
    for cls in type(error).__mro__:
        if cls.__module__ == __name__ and issubclass(cls, ForgemlError):
            return _code_of(cls)
    return "forgeml"  # unreachable: every ForgemlError has ForgemlError in its MRO
