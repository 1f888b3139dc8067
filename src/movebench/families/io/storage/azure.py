"""What the blob and fileshare backends share: credentials, retries, client options.

Credentials: a connection string, read at run time from the environment
variable named in the config (`connection_string_env`) or from a file named
in the config (`credentials_file`, its whole content). The value itself never
passes through the config, the command line, records, meta or logs: the kernel
receives only the variable's name or the file's path.

Retries: the SDK's own `ExponentialRetry` policy does the retrying; the
subclass below only counts the retries it decides to make, so each record can
say how many requests were retried while it was measured.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from movebench.core.envinfo import redact_value


class CredentialError(ValueError):
    """No usable connection string: says where it was looked for, never what it was."""


def read_connection_string(env_name: str | None, credentials_file: str | None) -> str:
    if credentials_file:
        path = Path(credentials_file).expanduser()
        try:
            text = path.read_text().strip()
        except OSError as exc:
            raise CredentialError(f"cannot read credentials_file {str(path)!r}: {exc.strerror}") from None
        if not text:
            raise CredentialError(f"credentials_file {str(path)!r} is empty: it must hold a connection string")
        return text
    value = os.environ.get(env_name or "", "").strip()
    if not value and env_name == "MOVEBENCH_AZURITE_CONNECTION_STRING":
        raise CredentialError(
            f"environment variable {env_name} is not set: blob.emulator is azurite, which the workflow "
            "starts when a blob point is about to run (snakemake's onstart); outside the workflow, start one "
            "with: python -m movebench.services.azurite run -- COMMAND"
        )
    if not value:
        raise CredentialError(
            f"environment variable {env_name} is not set: it must hold the account's connection "
            "string (or name a credentials_file)"
        )
    return value


def parse_connection_string(text: str) -> dict:
    """`Key=Value;...` -> {key: value}; keys compared case-insensitively by callers."""
    fields = {}
    for part in text.split(";"):
        if "=" in part:
            key, _, value = part.partition("=")
            fields[key.strip()] = value.strip()
    return fields


def connection_problem(text: str, service: str) -> str | None:
    """Why `text` cannot reach `service` ("blob" or "file"), or None; never quotes a secret."""
    fields = {k.lower(): v for k, v in parse_connection_string(text).items()}
    if not fields:
        return "is not a connection string (expected Key=Value pairs separated by ';')"
    if "accountkey" not in fields and "sharedaccesssignature" not in fields:
        return "has neither AccountKey nor SharedAccessSignature"
    endpoint = f"{service}endpoint"
    if endpoint not in fields and "accountname" not in fields:
        return f"has neither {service.capitalize()}Endpoint nor AccountName"
    if endpoint not in fields and any(k.endswith("endpoint") for k in fields):
        named = ", ".join(sorted(k for k in fields if k.endswith("endpoint")))
        return f"names endpoints ({named}) but no {service.capitalize()}Endpoint" + (
            " (Azurite has no Azure Files service)" if service == "file" else ""
        )
    return None


def endpoint_of(text: str, service: str) -> str:
    """The service endpoint for meta (no secret in it; a SAS query string is cut)."""
    fields = {k.lower(): v for k, v in parse_connection_string(text).items()}
    if f"{service}endpoint" in fields:
        return redact_value(fields[f"{service}endpoint"].split("?")[0])
    suffix = fields.get("endpointsuffix", "core.windows.net")
    return f"{fields.get('defaultendpointsprotocol', 'https')}://{fields.get('accountname')}.{service}.{suffix}"


def counting_retry(exponential_retry, total: int, initial_backoff_s: float, increment_base_s: float, jitter_s: float):
    """The SDK's `ExponentialRetry` (each storage package ships its own), counting the retries it makes."""

    class CountingRetry(exponential_retry):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._lock = threading.Lock()
            self.count = 0

        def increment(self, settings, request, response=None, error=None):
            retrying = super().increment(settings, request, response=response, error=error)
            if retrying:
                with self._lock:  # uploads with max_concurrency > 1 retry from several threads
                    self.count += 1
            elif error is not None:
                # The SDK re-raises the last try's error and drops this request's retry history: keep on the
                # error how often its own request was retried (self.count sums every request of the point).
                error.movebench_retried = settings["count"]
            return retrying

    return CountingRetry(
        retry_total=total,
        initial_backoff=initial_backoff_s,
        increment_base=increment_base_s,
        random_jitter_range=jitter_s,
    )


def client_options(settings: dict, exponential_retry) -> dict:
    """Keyword arguments of a storage client: the counting retry policy and network timeouts."""
    retry = settings["retry"]
    policy = counting_retry(
        exponential_retry, retry["total"], retry["initial_backoff_s"], retry["increment_base_s"], retry["jitter_s"]
    )
    return {
        "retry_policy": policy,
        "connection_timeout": settings["request_timeout_s"],
        "read_timeout": settings["request_timeout_s"],
    }


TIMEOUT_KEY = "io.request_timeout_s"


def unanswered(exc: BaseException) -> bool:
    """A request that ran out of time: no answer (read) or no progress sending (connect or send)."""
    from azure.core.exceptions import ServiceRequestError, ServiceResponseError

    if not isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return False
    # Only the read side has its own class (ServiceResponseTimeoutError); a stalled connect or body send
    # arrives as ServiceRequestError or ServiceResponseError around urllib3's "timed out".
    return "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower()


def timeout_line(exc: BaseException, backend: str, endpoint: str, settings: dict) -> str | None:
    """One line for a request the endpoint never answered: the endpoint (no secret in it) and the key to change."""
    if not unanswered(exc):
        return None
    retried = getattr(exc, "movebench_retried", settings["retry"]["total"])
    return redact_value(
        f"io {backend}: the endpoint {endpoint} did not answer within {settings['request_timeout_s']:g} s "
        f"({TIMEOUT_KEY}; retried {retried} times)"
    )


def describe_error(exc: BaseException) -> str:
    """One line for the log: the service's error code when there is one, never a credential."""
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)  # the SDK's StorageErrorCode enum -> the service's own spelling
    status = getattr(exc, "status_code", None)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    head = " ".join(x for x in (f"HTTP {status}" if status else "", str(code) if code else "") if x)
    return redact_value(f"{type(exc).__name__}{' (' + head + ')' if head else ''}: {text}")
