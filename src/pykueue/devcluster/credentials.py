"""The control plane's credentials, made with the ``openssl`` command line tool, and its kubeconfig.

A CA, the apiserver's serving certificate, an admin client certificate (``system:masters``),
the front proxy's client certificate, a bearer token and the service-account signing key,
each valid for a week, in one folder readable by its owner only.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pykueue.devcluster.processes import ControlPlaneError

_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
prompt = no

[dn]
CN = unused

[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash

[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = {sans}
authorityKeyIdentifier = keyid

[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
"""


@dataclass
class Credentials:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    front_proxy_cert: Path
    front_proxy_key: Path
    sa_key: Path
    sa_pub: Path
    token: str
    token_file: Path


def _openssl(*args: str) -> None:
    try:
        subprocess.run(["openssl", *args], check=True, capture_output=True, text=True, timeout=60)
    except FileNotFoundError as exc:
        raise ControlPlaneError("the `openssl` command is needed to create the test certificates") from exc
    except subprocess.CalledProcessError as exc:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed: {exc.stderr}") from exc


def make_credentials(directory: Path, service_ip: str) -> Credentials:
    """Create a CA, the apiserver's serving cert (valid for ``service_ip`` too), an admin client
    cert, a token and the SA key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    sans = ", ".join(
        [
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
            "IP:127.0.0.1",
            f"IP:{service_ip}",
        ]
    )
    config = directory / "openssl.cnf"
    config.write_text(_OPENSSL_CONFIG.format(sans=sans))

    def key(name: str) -> Path:
        path = directory / f"{name}.key"
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))
        return path

    def signed(name: str, subject: str, extensions: str, serial: int) -> tuple[Path, Path]:
        private = key(name)
        csr = directory / f"{name}.csr"
        cert = directory / f"{name}.crt"
        _openssl(
            "req", "-new", "-key", str(private), "-subj", subject, "-config", str(config), "-out", str(csr)
        )
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
            "-set_serial", str(serial), "-days", "7", "-sha256",
            "-extfile", str(config), "-extensions", extensions, "-out", str(cert),
        )  # fmt: skip
        return cert, private

    ca_key = key("ca")
    ca_cert = directory / "ca.crt"
    _openssl(
        "req", "-x509", "-new", "-key", str(ca_key), "-subj", "/CN=pykueue-test-ca", "-days", "7",
        "-sha256", "-config", str(config), "-extensions", "ca_ext", "-out", str(ca_cert),
    )  # fmt: skip
    serving_cert, serving_key = signed("apiserver", "/CN=kube-apiserver", "server_ext", 2)
    admin_cert, admin_key = signed("admin", "/O=system:masters/CN=pykueue-admin", "client_ext", 3)
    # The apiserver's identity when it proxies to aggregated API servers (APIService objects).
    front_proxy_cert, front_proxy_key = signed(
        "front-proxy-client", "/CN=front-proxy-client", "client_ext", 4
    )
    sa_key = key("service-account")
    sa_pub = directory / "service-account.pub"
    _openssl("pkey", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))

    token = secrets.token_hex(24)
    token_file = directory / "tokens.csv"
    token_file.write_text(f'{token},pykueue-admin,pykueue-admin,"system:masters"\n')
    for path in directory.iterdir():
        path.chmod(0o600)
    return Credentials(
        ca_cert=ca_cert,
        ca_key=ca_key,
        serving_cert=serving_cert,
        serving_key=serving_key,
        admin_cert=admin_cert,
        admin_key=admin_key,
        front_proxy_cert=front_proxy_cert,
        front_proxy_key=front_proxy_key,
        sa_key=sa_key,
        sa_pub=sa_pub,
        token=token,
        token_file=token_file,
    )


def write_kubeconfig(path: Path, server: str, creds: Credentials, inline: bool = False) -> Path:
    """A kubeconfig (JSON is valid YAML) for the admin user, authenticating with its client cert.

    ``inline`` puts the certificates and key in the file itself (``*-data``), for readers
    that take only those (upstream's scheduler-performance runner writes its own so).
    """

    def ref(key: str, file: Path) -> dict[str, str]:
        if inline:
            return {f"{key}-data": base64.b64encode(file.read_bytes()).decode()}
        return {key: str(file)}

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "pykueue-test",
                "cluster": {"server": server, **ref("certificate-authority", creds.ca_cert)},
            }
        ],
        "users": [
            {
                "name": "pykueue-admin",
                "user": {
                    **ref("client-certificate", creds.admin_cert),
                    **ref("client-key", creds.admin_key),
                },
            }
        ],
        "contexts": [
            {"name": "pykueue-test", "context": {"cluster": "pykueue-test", "user": "pykueue-admin"}}
        ],
        "current-context": "pykueue-test",
        "preferences": {},
    }
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path
