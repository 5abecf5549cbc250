"""Webhook certificates: made, checked, judged for renewal, stored and read back."""

from __future__ import annotations

import base64
import datetime
import ssl

import pytest
from cryptography import x509

from pykueue.kube import certs

NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)
CONFIG = certs.CertConfig(namespace="kueue-system")


def test_serving_certificate_is_for_the_service_and_signed_by_the_ca() -> None:
    fresh = certs.renew(CONFIG, None, NOW)
    fresh.check()
    assert certs.hosts_of(fresh.serving.certificate) == {
        "pykueue-webhook-service.kueue-system.svc",
        "pykueue-webhook-service.kueue-system.svc.cluster.local",
        "pykueue-webhook-service",
        "pykueue-webhook-service.kueue-system",
    }
    ca = fresh.ca.certificate
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    serving = fresh.serving.certificate
    assert serving.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert fresh.serving.not_after == NOW + CONFIG.cert_valid_for
    # Python's TLS stack accepts the pair and trusts it through the bundle.
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    fresh.load_into(server)
    client = ssl.create_default_context(cadata=fresh.ca_bundle.decode())
    assert client.get_ca_certs()[0]["subject"] == ((("commonName", "pykueue-ca"),),)


def test_ip_hosts_become_ip_addresses() -> None:
    config = certs.CertConfig(hosts=("127.0.0.1", "localhost"))
    fresh = certs.renew(config, None, NOW)
    san = fresh.serving.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]


def test_renewal_is_due_near_expiry_or_for_other_hosts() -> None:
    fresh = certs.renew(CONFIG, None, NOW)
    assert certs.needs_renewal(fresh, CONFIG, NOW) == ""
    late = NOW + CONFIG.cert_valid_for - CONFIG.renew_before + datetime.timedelta(days=1)
    assert "serving certificate expires" in certs.needs_renewal(fresh, CONFIG, late)
    moved = certs.CertConfig(namespace="elsewhere")
    assert "not for" in certs.needs_renewal(fresh, moved, NOW)


def test_renewal_keeps_the_previous_ca_in_the_bundle_while_it_is_valid() -> None:
    first = certs.renew(CONFIG, None, NOW)
    second = certs.renew(CONFIG, first, NOW + datetime.timedelta(days=300))
    bundle = certs.split_pem(second.ca_bundle)
    assert bundle == [second.ca.cert, first.ca.cert]
    # Chains do not grow: only the previous current CA is kept.
    third = certs.renew(CONFIG, second, NOW + datetime.timedelta(days=600))
    assert certs.split_pem(third.ca_bundle) == [third.ca.cert, second.ca.cert]
    # An expired previous CA is not carried along.
    much_later = NOW + CONFIG.ca_valid_for + datetime.timedelta(days=1)
    assert len(certs.split_pem(certs.renew(CONFIG, first, much_later).ca_bundle)) == 1


def test_secret_round_trip_and_refusal_of_mismatched_pairs() -> None:
    fresh = certs.renew(CONFIG, None, NOW)
    data = fresh.to_secret_data()
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    again = certs.Certificates.from_secret_data(data)
    assert again == fresh
    other = certs.renew(CONFIG, None, NOW)
    mixed = {**data, "tls.key": base64.b64encode(other.serving.key).decode()}
    with pytest.raises(ValueError, match="does not match"):
        certs.Certificates.from_secret_data(mixed)
    foreign = {**data, "ca.crt": base64.b64encode(other.ca.cert).decode()}
    with pytest.raises(ValueError, match="not signed by the CA"):
        certs.Certificates.from_secret_data(foreign)
    with pytest.raises(KeyError):
        certs.Certificates.from_secret_data({"tls.crt": data["tls.crt"]})
