"""A real HTTP(S) server on 127.0.0.1 for source tests: serves bytes the test sets, honours ETag /
If-None-Match, can answer with an error status, check a bearer token, drip its body, and go down
and come back on its port. `make_tls` makes a CA and a certificate for 127.0.0.1 signed by it."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# Safety net for a test waiting on a request that never comes; requests come within a second.
REQUEST_WAIT = 10.0


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    status: int  # what the server answered


class ManifestServer:
    def __init__(self, *, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        self.host = host  # any loopback address: another one is another origin
        self.redirect: str | None = None  # else: /pods answers 302 to this URL (other paths: the body)
        self.body = b""
        self.etag: str | None = None  # None: no ETag header
        self.status = 200  # anything else: answered instead of the body
        self.token: str | None = None  # else: 401 unless "Authorization: Bearer <token>"
        self.drip = 0.0  # else: the body is written a byte at a time, this many seconds apart
        self._tls = tls
        self.requests: asyncio.Queue[Request] = asyncio.Queue()
        self.port = 0
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://{self.host}:{self.port}/pods"

    def serve(self, body: bytes | str, *, etag: str | None = None, status: int = 200) -> None:
        with self._lock:
            self.body = body.encode() if isinstance(body, str) else body
            self.etag, self.status = etag, status

    def start(self) -> None:
        """Listen (again) on the same port as before, or a free one the first time."""
        self._httpd = ThreadingHTTPServer((self.host, self.port), self._handler())
        self._httpd.daemon_threads = True
        if self._tls is not None:
            # The handshake in the request's thread, not in the accepting one.
            self._httpd.socket = self._tls.wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        self.port = self._httpd.server_address[1]
        # A short poll interval: `stop` waits for the serving loop to notice.
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        """Go down: connections are refused until `start` again."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    async def next_request(self) -> Request:
        return await asyncio.wait_for(self.requests.get(), REQUEST_WAIT)

    def _answer(self, headers: dict[str, str]) -> tuple[int, bytes, str | None]:
        with self._lock:
            body, etag, status, token = self.body, self.etag, self.status, self.token
        if token is not None and headers.get("Authorization") != f"Bearer {token}":
            return 401, b"Unauthorized\n", None
        if status != 200:
            return status, b"failing on purpose\n", None
        if etag is not None and headers.get("If-None-Match") == etag:
            return 304, b"", etag
        return 200, body, etag

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                headers = dict(self.headers.items())
                status, payload, etag = owner._answer(headers)
                redirect = owner.redirect if self.path == "/pods" else None
                if redirect is not None:
                    status, payload, etag = HTTPStatus.FOUND, b"", None
                self.send_response(status)
                if redirect is not None:
                    self.send_header("Location", redirect)
                if etag is not None:
                    self.send_header("ETag", etag)
                if status != HTTPStatus.NOT_MODIFIED:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if status != HTTPStatus.NOT_MODIFIED:
                    self._write(payload)
                self.wfile.flush()
                request = Request(self.path, headers, status)
                owner._loop.call_soon_threadsafe(owner.requests.put_nowait, request)

            def _write(self, payload: bytes) -> None:
                if not owner.drip:
                    self.wfile.write(payload)
                    return
                try:
                    for i in range(len(payload)):
                        self.wfile.write(payload[i : i + 1])
                        self.wfile.flush()
                        time.sleep(owner.drip)
                except OSError:  # the client gave up, as it should
                    pass

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@dataclass(frozen=True)
class TLSFiles:
    ca: Path  # the CA's certificate (PEM): what a client trusts
    server: ssl.SSLContext  # a server context with a certificate for 127.0.0.1 signed by the CA
    cert: Path  # that certificate (PEM), for servers that load their own files
    key: Path  # its private key (PEM)


def make_tls(directory: Path) -> TLSFiles:
    """A fresh CA and a serving certificate for 127.0.0.1 and localhost that it signed: the
    kubelet's /pods and the test kube-apiserver both serve with it."""
    now = datetime.datetime.now(datetime.UTC)

    def certificate(
        subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, signer: ec.EllipticCurvePrivateKey
    ) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test kubelet CA")])
    ca_cert = (
        certificate("test kubelet CA", ca_key, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        certificate("127.0.0.1", key, ca_name, ca_key)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / "ca.crt"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    return TLSFiles(ca_path, context, cert_path, key_path)
