"""The webhook server's certificates: made, stored, rotated and published by pykueue itself.

The API server calls webhooks over HTTPS and checks the serving certificate against
the ``caBundle`` of each webhook configuration (and of each CRD's conversion
webhook). Like upstream Kueue (which uses open-policy-agent's cert-controller), we
need no cert-manager:

1. `ensure` reads the Secret ``<namespace>/<secret>``; when it is missing, unreadable,
   for other host names, or close to expiry, a fresh self-signed CA and a serving
   certificate signed by it are written there (create, or update at the version read:
   two replicas racing end with one winner whose certificate both then use);
2. `publish` patches the CA into the named Mutating/ValidatingWebhookConfigurations and
   into every pykueue CRD whose conversion goes to a webhook;
3. `Rotator.run` repeats both on a timer, and hands a new pair to the running server
   (`ssl.SSLContext.load_cert_chain` on the live context: new handshakes use it, open
   connections finish with the old one).

A new CA is made with every rotation, and the old CA is *kept in the bundle* until its
own expiry, so an API server that still has the old bundle cached keeps trusting the
server during the switch.

Talking to Kubernetes goes through the small `KubeAccess` protocol (get/create/update
of plain manifests), which `pykueue.store.kubernetes.KubernetesStore` satisfies.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import logging
import ssl
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pykueue.api import crd
from pykueue.errors import AlreadyExists, Conflict, NotFound
from pykueue.views import visibility

log = logging.getLogger(__name__)

Manifest = dict[str, Any]

CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
CERT_KEY = "tls.crt"
KEY_KEY = "tls.key"


class KubeAccess(Protocol):
    """What certificate management needs from a Kubernetes client."""

    async def get(self, kind: str, namespace: str, name: str) -> Manifest: ...

    async def create(self, obj: Manifest) -> Manifest: ...

    async def update(self, obj: Manifest) -> Manifest: ...


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


# --- making certificates ---------------------------------------------------------------


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert: bytes
    key: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert)

    @property
    def not_after(self) -> datetime.datetime:
        return self.certificate.not_valid_after_utc


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_ca(common_name: str, valid_for: datetime.timedelta, now: datetime.datetime | None = None) -> KeyPair:
    """A self-signed CA that may sign server certificates only."""
    now = now or _now()
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # clock skew between nodes
        .not_valid_after(now + valid_for)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def make_serving_cert(
    ca: KeyPair,
    hosts: Sequence[str],
    valid_for: datetime.timedelta,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A server certificate for `hosts` (DNS names or IP addresses), signed by `ca`."""
    now = now or _now()
    ca_cert = ca.certificate
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    key = _key()
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(min(now + valid_for, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def hosts_of(cert: x509.Certificate) -> set[str]:
    """The DNS names and IP addresses a certificate is valid for."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {
        *san.get_values_for_type(x509.DNSName),
        *(str(ip) for ip in san.get_values_for_type(x509.IPAddress)),
    }


def split_pem(bundle: bytes) -> list[bytes]:
    """The certificates of a PEM bundle, each as its own PEM block."""
    end = b"-----END CERTIFICATE-----"
    return [part.strip() + b"\n" + end + b"\n" for part in bundle.split(end) if part.strip()]


# --- what is stored ----------------------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    """The CA, the serving pair, and the CA bundle to publish (current CA first)."""

    ca: KeyPair
    serving: KeyPair
    ca_bundle: bytes

    def to_secret_data(self) -> dict[str, str]:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode("ascii")

        return {
            CA_CERT_KEY: b64(self.ca_bundle),
            CA_KEY_KEY: b64(self.ca.key),
            CERT_KEY: b64(self.serving.cert),
            KEY_KEY: b64(self.serving.key),
        }

    @classmethod
    def from_secret_data(cls, data: dict[str, str]) -> Certificates:
        """Decode a Secret's data; ValueError (or KeyError) when anything is missing or bad."""
        raw = {name: base64.b64decode(data[name]) for name in (CA_CERT_KEY, CA_KEY_KEY, CERT_KEY, KEY_KEY)}
        bundle = raw[CA_CERT_KEY]
        ca = KeyPair(split_pem(bundle)[0], raw[CA_KEY_KEY])
        serving = KeyPair(raw[CERT_KEY], raw[KEY_KEY])
        certs = cls(ca, serving, bundle)
        certs.check()
        return certs

    def check(self) -> None:
        """ValueError unless the serving certificate is signed by the CA and matches its key."""
        serving = self.serving.certificate
        try:
            serving.verify_directly_issued_by(self.ca.certificate)
        except InvalidSignature:
            raise ValueError("tls.crt is not signed by the CA in ca.crt") from None
        key = serialization.load_pem_private_key(self.serving.key, password=None)
        if key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ) != serving.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ):
            raise ValueError("tls.key does not match tls.crt")

    def write(self, directory: Path) -> tuple[Path, Path]:
        """Write tls.crt and tls.key (0600) into `directory`; their paths."""
        directory.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = directory / CERT_KEY, directory / KEY_KEY
        cert_path.write_bytes(self.serving.cert)
        key_path.touch(mode=0o600)
        key_path.write_bytes(self.serving.key)
        return cert_path, key_path

    def load_into(self, context: ssl.SSLContext) -> None:
        """Make a (live) server context present this serving certificate."""
        with tempfile.TemporaryDirectory(prefix="pykueue-certs-") as tmp:
            cert_path, key_path = self.write(Path(tmp))
            context.load_cert_chain(cert_path, key_path)


# --- the policy ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CertConfig:
    """Where the certificates live, who they are for, and when they are renewed.

    `hosts` default to the Service's DNS names; an out-of-cluster server (tests,
    development) lists its own, e.g. ``("127.0.0.1", "localhost")``.
    """

    namespace: str = "kueue-system"
    secret_name: str = "pykueue-webhook-server-cert"
    service_name: str = "pykueue-webhook-service"
    hosts: tuple[str, ...] = ()
    ca_name: str = "pykueue-ca"
    ca_valid_for: datetime.timedelta = datetime.timedelta(days=3650)
    cert_valid_for: datetime.timedelta = datetime.timedelta(days=365)
    # Renew when less than this is left (upstream's cert-controller looks 90 days ahead).
    renew_before: datetime.timedelta = datetime.timedelta(days=90)
    check_every: datetime.timedelta = datetime.timedelta(hours=1)
    mutating_webhook: str = "pykueue-mutating-webhook-configuration"
    validating_webhook: str = "pykueue-validating-webhook-configuration"
    crd_names: tuple[str, ...] = field(default_factory=lambda: tuple(crd.crd_names()))
    api_services: tuple[str, ...] = tuple(f"{v}.{visibility.GROUP}" for v in visibility.VERSIONS)

    def service_hosts(self) -> tuple[str, ...]:
        if self.hosts:
            return self.hosts
        svc, ns = self.service_name, self.namespace
        return (f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.cluster.local", svc, f"{svc}.{ns}")


def needs_renewal(certs: Certificates, config: CertConfig, now: datetime.datetime | None = None) -> str:
    """Why the stored certificates must be replaced ("" when they are good)."""
    now = now or _now()
    if certs.serving.not_after - now < config.renew_before:
        return f"serving certificate expires {certs.serving.not_after:%Y-%m-%d}"
    if certs.ca.not_after - now < config.renew_before:
        return f"CA expires {certs.ca.not_after:%Y-%m-%d}"
    wanted = set(config.service_hosts())
    if not wanted <= hosts_of(certs.serving.certificate):
        return f"serving certificate is not for {sorted(wanted)}"
    return ""


def renew(
    config: CertConfig, previous: Certificates | None, now: datetime.datetime | None = None
) -> Certificates:
    """A new CA and serving pair; the previous CA stays in the bundle while it is valid."""
    now = now or _now()
    ca = make_ca(config.ca_name, config.ca_valid_for, now)
    serving = make_serving_cert(ca, config.service_hosts(), config.cert_valid_for, now)
    bundle = ca.cert
    if previous is not None:
        for old in split_pem(previous.ca_bundle)[:1]:
            if x509.load_pem_x509_certificate(old).not_valid_after_utc > now:
                bundle += old
    return Certificates(ca, serving, bundle)


# --- in the cluster -------------------------------------------------------------------------


async def ensure(kube: KubeAccess, config: CertConfig) -> Certificates:
    """The certificates in the Secret, renewed there first when needed."""
    for _ in range(5):
        try:
            secret: Manifest | None = await kube.get("Secret", config.namespace, config.secret_name)
        except NotFound:
            secret = None
        current: Certificates | None = None
        reason = "no certificate yet"
        if secret is not None:
            try:
                current = Certificates.from_secret_data(dict(secret.get("data") or {}))
            except (KeyError, ValueError, TypeError) as exc:
                reason = f"stored certificate unusable ({exc})"
            else:
                reason = needs_renewal(current, config)
                if not reason:
                    return current
        fresh = renew(config, current)
        log.info(
            "writing new webhook certificates to %s/%s: %s", config.namespace, config.secret_name, reason
        )
        try:
            if secret is None:
                await kube.create(_secret(config, fresh))
            else:
                body = _secret(config, fresh)
                body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
                await kube.update(body)
        except (AlreadyExists, Conflict):
            continue  # another replica wrote first: use its certificates
        return fresh
    raise Conflict(
        f"Secret {config.namespace}/{config.secret_name}: kept changing while writing certificates"
    )


def _secret(config: CertConfig, certs: Certificates) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": config.secret_name,
            "namespace": config.namespace,
            "labels": {"app.kubernetes.io/name": "pykueue", "app.kubernetes.io/component": "webhook-cert"},
        },
        "type": "Opaque",
        "data": certs.to_secret_data(),
    }


async def publish(kube: KubeAccess, config: CertConfig, ca_bundle: bytes) -> list[str]:
    """Write `ca_bundle` into the webhook configurations, conversion CRDs and the visibility
    APIServices; what changed."""
    encoded = base64.b64encode(ca_bundle).decode("ascii")
    changed: list[str] = []

    def webhooks(obj: Manifest) -> bool:
        dirty = False
        for hook in obj.get("webhooks") or []:
            client = hook.setdefault("clientConfig", {})
            if client.get("caBundle") != encoded:
                client["caBundle"] = encoded
                dirty = True
        return dirty

    def conversion(obj: Manifest) -> bool:
        conv = obj.get("spec", {}).get("conversion") or {}
        if conv.get("strategy") != "Webhook":
            return False
        client = conv.setdefault("webhook", {}).setdefault("clientConfig", {})
        if client.get("caBundle") == encoded:
            return False
        client["caBundle"] = encoded
        return True

    def api_service(obj: Manifest) -> bool:
        spec = obj.setdefault("spec", {})
        # One that skips verification (upstream's way) is left so: the two exclude each other.
        if spec.get("insecureSkipTLSVerify") or spec.get("caBundle") == encoded:
            return False
        spec["caBundle"] = encoded
        return True

    targets: list[tuple[str, str, Callable[[Manifest], bool]]] = [
        ("MutatingWebhookConfiguration", config.mutating_webhook, webhooks),
        ("ValidatingWebhookConfiguration", config.validating_webhook, webhooks),
        *(("CustomResourceDefinition", name, conversion) for name in config.crd_names),
        *(("APIService", name, api_service) for name in config.api_services),
    ]
    for kind, name, patch in targets:
        if await _update_with_retry(kube, kind, name, patch):
            changed.append(f"{kind}/{name}")
    return changed


async def _update_with_retry(
    kube: KubeAccess, kind: str, name: str, patch: Callable[[Manifest], bool]
) -> bool:
    for _ in range(5):
        try:
            obj = await kube.get(kind, "", name)
        except NotFound:
            return False  # not installed (e.g. webhooks disabled): nothing to publish to
        if not patch(obj):
            return False
        try:
            await kube.update(obj)
        except Conflict:
            continue
        return True
    raise Conflict(f"{kind}/{name}: kept changing while publishing the CA bundle")


@dataclass
class Rotator:
    """Keeps the certificates fresh and published while the server runs."""

    kube: KubeAccess
    config: CertConfig
    on_change: Callable[[Certificates], None]
    current: Certificates | None = None

    async def refresh(self) -> Certificates:
        """One round: ensure, publish, and tell the server when the pair changed."""
        certs = await ensure(self.kube, self.config)
        await publish(self.kube, self.config, certs.ca_bundle)
        if self.current is None or certs.serving.cert != self.current.serving.cert:
            self.current = certs
            self.on_change(certs)
        return certs

    async def run(self) -> None:
        """Refresh every `CertConfig.check_every` until cancelled; errors are logged and retried."""
        while True:
            await asyncio.sleep(self.config.check_every.total_seconds())
            try:
                await self.refresh()
            except Exception:  # the next round tries again; the old certificate still works
                log.exception("webhook certificate rotation failed")
