"""A local stand-in for the Azure Files REST API, for testing the fileshare backend.

Azure Files has no emulator (Azurite covers Blob, Queue and Table only), so the
fileshare backend is tested through the real azure-storage-file-share SDK
against this server. It implements exactly the operations the backend uses,
with the status codes, headers and error codes of the real service:

    GET    /<account>?comp=list[&prefix=]          List Shares
    PUT    /<account>/<share>?restype=share        Create Share
    DELETE /<account>/<share>?restype=share        Delete Share
    PUT    /<account>/<share>/<file>               Create File (x-ms-type: file, x-ms-content-length)
    PUT    /<account>/<share>/<file>?comp=range    Put Range (x-ms-range, x-ms-write: update, <= 4 MiB)
    GET    /<account>/<share>/<file>               Get File (x-ms-range or Range)
    HEAD   /<account>/<share>/<file>               Get File Properties
    DELETE /<account>/<share>/<file>               Delete File

Every request must carry `Authorization: SharedKey <account>:<signature>`, the
HMAC-SHA256 with the account key of the string to sign that the Storage
services define (verb, standard headers, canonicalized x-ms- headers and
resource); anything else gets 403 AuthenticationFailed. Files live in memory.

Faults for tests: `fail_next(n, status, match)` answers the next n requests
whose path contains `match` with that status (503 ServerBusy by default)
before doing anything; `stop()` cuts every open connection, as a dying service.

Run it by hand: `python tests/fileshare_standin.py` prints a connection string.
To test against a real account instead, put its connection string (with a
FileEndpoint or AccountName) in AZURE_STORAGE_CONNECTION_STRING and enable the
fileshare backend; see docs/io.md.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import socket
import threading
import uuid
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit
from xml.sax.saxutils import escape

ACCOUNT = "standinaccount"
KEY = base64.b64encode(b"movebench-fileshare-standin-key!").decode()
MAX_RANGE = 4 * 1024**2
SIGNED_HEADERS = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


def string_to_sign(method: str, raw_path: str, headers: dict, account: str) -> str:
    """Shared Key string to sign (Storage services, version 2015-02-21 and later)."""
    lower = {k.lower(): v for k, v in headers.items()}
    standard = []
    for name in SIGNED_HEADERS:
        value = lower.get(name, "")
        if name == "content-length" and value == "0":
            value = ""
        standard.append(value)
    x_ms = sorted((k, v.strip()) for k, v in lower.items() if k.startswith("x-ms-"))
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in x_ms)
    path, _, query = raw_path.partition("?")
    params = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(name.lower(), []).append(value)
    canonical_query = "".join(f"\n{k}:{','.join(sorted(v))}" for k, v in sorted(params.items()))
    return method + "\n" + "\n".join(standard) + "\n" + canonical_headers + f"/{account}{path}" + canonical_query


def signature(key: str, text: str) -> str:
    return base64.b64encode(hmac.new(base64.b64decode(key), text.encode("utf-8"), hashlib.sha256).digest()).decode()


class Store:
    """Shares -> files -> bytearray, with the lock every handler thread takes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.shares: dict[str, dict[str, bytearray]] = {}
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status), for tests
        self.failures: list[tuple[int, str]] = []  # (status, text the request line must contain)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "movebench-fileshare-standin"

    def log_message(self, *args):  # quiet: the tests read .store.requests instead
        pass

    def setup(self):
        super().setup()
        with self.server.store.lock:
            self.server.connections.add(self.connection)

    def finish(self):
        with self.server.store.lock:
            self.server.connections.discard(self.connection)
        super().finish()

    # --- plumbing ---

    @property
    def store(self) -> Store:
        return self.server.store

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, code: str | None = None):
        self.send_response(status)
        version = self.headers.get("x-ms-version")
        self.send_header("x-ms-request-id", str(uuid.uuid4()))
        if version:
            self.send_header("x-ms-version", version)
        self.send_header("Date", formatdate(usegmt=True))
        if code:
            self.send_header("x-ms-error-code", code)
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        with self.store.lock:
            self.store.requests.append((self.command, self.path, status))

    def _error(self, status: int, code: str, message: str):
        body = (
            f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
            f"<Message>{escape(message)}</Message></Error>"
        ).encode()
        self._send(status, body, {"Content-Type": "application/xml"}, code=code)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _authorized(self) -> bool:
        auth = self.headers.get("Authorization", "")
        scheme, _, credential = auth.partition(" ")
        account, _, given = credential.partition(":")
        if scheme != "SharedKey" or account != self.server.account or not self.headers.get("x-ms-date"):
            return False
        expected = signature(
            self.server.key, string_to_sign(self.command, self.path, dict(self.headers.items()), self.server.account)
        )
        return hmac.compare_digest(expected, given)

    def _route(self):
        parts = urlsplit(self.path)
        segments = [unquote(s) for s in parts.path.split("/") if s]
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        if not segments or segments[0] != self.server.account:
            return None, None, query
        return (segments[1] if len(segments) > 1 else None), ("/".join(segments[2:]) or None), query

    def _handle(self):
        body = self._body()  # read it even when refusing, so that the connection stays usable
        with self.store.lock:
            fail = next(
                ((i, status) for i, (status, match) in enumerate(self.store.failures) if match in self.path), None
            )
            if fail:
                del self.store.failures[fail[0]]
                fail = fail[1]
        if fail:
            return self._error(fail, "ServerBusy", "Injected fault: the server is busy.")
        if not self._authorized():
            return self._error(
                403,
                "AuthenticationFailed",
                "Server failed to authenticate the request. Make sure "
                "the value of Authorization header is formed correctly including the signature.",
            )
        share, path, query = self._route()
        method = self.command
        if share is None:
            if method == "GET" and query.get("comp") == "list":
                return self._list_shares(query.get("prefix", ""))
            return self._error(400, "UnsupportedHttpVerb", f"{method} {self.path} is not implemented by the stand-in")
        if path is None:
            if query.get("restype") != "share":
                return self._error(400, "InvalidQueryParameterValue", "restype=share expected")
            return {"PUT": self._create_share, "DELETE": self._delete_share}.get(
                method, lambda s: self._error(400, "UnsupportedHttpVerb", f"{method} on a share")
            )(share)
        with self.store.lock:
            files = self.store.shares.get(share)
        if files is None:
            return self._error(404, "ShareNotFound", "The specified share does not exist.")
        if method == "PUT" and query.get("comp") == "range":
            return self._put_range(files, path, body)
        if method == "PUT":
            return self._create_file(files, path)
        if method in ("GET", "HEAD"):
            return self._get_file(files, path)
        if method == "DELETE":
            with self.store.lock:
                found = files.pop(path, None)
            if found is None:
                return self._error(404, "ResourceNotFound", "The specified resource does not exist.")
            return self._send(202)
        return self._error(400, "UnsupportedHttpVerb", f"{method} on a file")

    do_GET = do_PUT = do_DELETE = do_HEAD = _handle

    # --- operations ---

    def _props(self) -> dict:
        return {"ETag": f'"0x{uuid.uuid4().hex[:15].upper()}"', "Last-Modified": formatdate(usegmt=True)}

    def _list_shares(self, prefix: str):
        with self.store.lock:
            names = sorted(n for n in self.store.shares if n.startswith(prefix))
        items = "".join(
            f"<Share><Name>{escape(n)}</Name><Properties><Last-Modified>{formatdate(usegmt=True)}"
            '</Last-Modified><Etag>"0x1"</Etag><Quota>5120</Quota></Properties></Share>'
            for n in names
        )
        body = (
            f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint='
            f'"http://{self.headers.get("Host")}/{self.server.account}/"><Prefix>{escape(prefix)}</Prefix>'
            f"<Shares>{items}</Shares><NextMarker /></EnumerationResults>"
        ).encode()
        self._send(200, body, {"Content-Type": "application/xml"})

    def _create_share(self, share):
        with self.store.lock:
            if share in self.store.shares:
                exists = True
            else:
                exists = False
                self.store.shares[share] = {}
        if exists:
            return self._error(409, "ShareAlreadyExists", "The specified share already exists.")
        self._send(201, headers=self._props())

    def _delete_share(self, share):
        with self.store.lock:
            found = self.store.shares.pop(share, None)
        if found is None:
            return self._error(404, "ShareNotFound", "The specified share does not exist.")
        self._send(202)

    def _create_file(self, files, path):
        if self.headers.get("x-ms-type", "").lower() != "file":
            return self._error(400, "MissingRequiredHeader", "x-ms-type: file is required.")
        size = int(self.headers.get("x-ms-content-length", "-1"))
        if size < 0:
            return self._error(400, "MissingRequiredHeader", "x-ms-content-length is required.")
        with self.store.lock:
            files[path] = bytearray(size)
        self._send(201, headers=self._props())

    def _put_range(self, files, path, body):
        match = _RANGE.match(self.headers.get("x-ms-range") or self.headers.get("Range") or "")
        if not match or not match.group(2):
            return self._error(400, "InvalidHeaderValue", "x-ms-range must be bytes=start-end.")
        start, end = int(match.group(1)), int(match.group(2))
        if self.headers.get("x-ms-write") != "update":
            return self._error(400, "InvalidHeaderValue", "only x-ms-write: update is implemented.")
        if end - start + 1 > MAX_RANGE:
            return self._error(413, "RequestBodyTooLarge", "A range may hold at most 4 MiB.")
        if len(body) != end - start + 1:
            return self._error(400, "InvalidHeaderValue", "The body length differs from the range.")
        with self.store.lock:
            data = files.get(path)
            if data is not None and end < len(data):
                data[start : end + 1] = body
        if data is None:
            return self._error(404, "ResourceNotFound", "The specified resource does not exist.")
        if end >= len(data):
            return self._error(416, "InvalidRange", "The range specified is invalid for the current size.")
        self._send(201, headers=self._props())

    def _get_file(self, files, path):
        with self.store.lock:
            data = files.get(path)
            data = bytes(data) if data is not None else None
        if data is None:
            return self._error(404, "ResourceNotFound", "The specified resource does not exist.")
        headers = {"x-ms-type": "File", "Content-Type": "application/octet-stream", **self._props()}
        if self.command == "HEAD":
            return self._send(200, headers={**headers, "Content-Length": len(data)})
        match = _RANGE.match(self.headers.get("x-ms-range") or self.headers.get("Range") or "")
        if not match:
            return self._send(200, data, headers)
        start = int(match.group(1))
        end = min(int(match.group(2)) if match.group(2) else len(data) - 1, len(data) - 1)
        if start >= len(data):
            return self._error(416, "InvalidRange", "The range specified is invalid for the current size.")
        self._send(206, data[start : end + 1], {**headers, "Content-Range": f"bytes {start}-{end}/{len(data)}"})


class StandIn:
    """The server on 127.0.0.1 and a free port, in a thread."""

    def __init__(self, account: str = ACCOUNT, key: str = KEY):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.account, self.server.key, self.server.store = account, key, Store()
        self.server.connections = set()
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def store(self) -> Store:
        return self.server.store

    def connection_string(self, key: str | None = None) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.server.account};AccountKey={key or self.server.key};"
            f"FileEndpoint=http://127.0.0.1:{self.port}/{self.server.account};"
        )

    def fail_next(self, count: int = 1, status: int = 503, match: str = "") -> None:
        """Answer the next `count` requests whose path contains `match` with `status`."""
        with self.store.lock:
            self.store.failures.extend([(status, match)] * count)

    def start(self) -> StandIn:
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection, as a service that dies would."""
        self.server.shutdown()
        self.server.server_close()
        with self.store.lock:
            open_connections = list(self.server.connections)
        for conn in open_connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    with StandIn() as standin:
        print(f"AZURE_STORAGE_CONNECTION_STRING='{standin.connection_string()}'", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
