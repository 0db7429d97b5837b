"""A certificate authority made by a test, and PEM certificates it signs for loopback."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK_NAMES = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]


@dataclass(frozen=True)
class Issued:
    """One certificate's PEM files: ``cert`` (with the CA after it), ``key`` (PKCS#8) and both in ``bundle``."""

    cert: Path
    key: Path
    bundle: Path


class TestAuthority:
    """A self-signed CA in ``directory`` (``ca.pem``) that issues EC P-256 certificates for 127.0.0.1."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, name: str = "wevent test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (self._builder(subject, self.key.public_key())
                     .issuer_name(subject)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.ca_file = self.directory / "ca.pem"
        self.ca_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    @staticmethod
    def _builder(subject: x509.Name, public_key) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.timezone.utc)
        return (x509.CertificateBuilder().subject_name(subject).public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2)))

    def issue(self, common_name: str, password: bytes | None = None) -> Issued:
        """A certificate for ``CN=common_name``, good for a server on loopback and for a client;
        its key encrypted with ``password`` if given."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]), key.public_key())
                .issuer_name(self.cert.subject)
                .add_extension(x509.SubjectAlternativeName(LOOPBACK_NAMES), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .sign(self.key, hashes.SHA256()))
        encryption = (serialization.BestAvailableEncryption(password) if password
                      else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.cert.public_bytes(serialization.Encoding.PEM)
        paths = Issued(*(self.directory / f"{common_name}.{kind}.pem" for kind in ("cert", "key", "bundle")))
        paths.cert.write_bytes(chain)
        paths.key.write_bytes(key_pem)
        paths.bundle.write_bytes(key_pem + chain)
        return paths
