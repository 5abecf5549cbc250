"""Who the visibility API believes: the front proxy's settings and headers (no cluster needed)."""

from __future__ import annotations

import json

import pytest
from starlette.datastructures import Headers

from pykueue.kube import front_proxy

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _configmap(**data: str) -> dict[str, object]:
    return {"data": {"requestheader-client-ca-file": CA, **data}}


def _config(allowed: tuple[str, ...] = ("front-proxy-client",)) -> front_proxy.RequestHeaderConfig:
    return front_proxy.RequestHeaderConfig(client_ca=CA.encode(), allowed_names=allowed)


def _headers(*pairs: tuple[str, str]) -> Headers:
    return Headers(raw=[(k.lower().encode(), v.encode()) for k, v in pairs])


def test_the_api_servers_published_settings_are_read() -> None:
    config = front_proxy.RequestHeaderConfig.from_configmap(
        _configmap(
            **{
                "requestheader-allowed-names": json.dumps(["aggregator"]),
                "requestheader-username-headers": json.dumps(["X-User"]),
                "requestheader-group-headers": json.dumps(["X-Group"]),
                "requestheader-extra-headers-prefix": json.dumps(["X-Extra-"]),
            }
        )
    )
    assert config.client_ca == CA.encode()
    assert config.allowed_names == ("aggregator",)
    assert (config.username_headers, config.group_headers) == (("X-User",), ("X-Group",))
    assert config.extra_headers_prefixes == ("X-Extra-",)


def test_settings_without_the_request_header_ca_are_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match="requestheader-client-ca-file"):
        front_proxy.RequestHeaderConfig.from_configmap({"data": {"client-ca-file": CA}})


def test_a_malformed_list_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match="requestheader-allowed-names"):
        front_proxy.RequestHeaderConfig.from_configmap(_configmap(**{"requestheader-allowed-names": "[oops"}))


def test_the_proxy_names_the_user_its_groups_and_extras() -> None:
    headers = _headers(
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "team-a"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-Scopes", "read"),
    )
    user = front_proxy.identify(_config(), "front-proxy-client", headers)
    assert user == front_proxy.User("alice", ("team-a", "system:authenticated"), {"scopes": ("read",)})


def test_headers_without_a_trusted_certificate_name_nobody() -> None:
    headers = _headers(("X-Remote-User", "alice"), ("X-Remote-Group", "system:masters"))
    assert front_proxy.identify(_config(), None, headers) is None
    assert front_proxy.identify(_config(), "pykueue-admin", headers) is None
    # An empty allowed list trusts any certificate the request-header CA signed, as the API server does.
    assert front_proxy.identify(_config(allowed=()), "pykueue-admin", headers) is not None


def test_a_proxied_request_without_a_user_is_nobody() -> None:
    assert front_proxy.identify(_config(), "front-proxy-client", _headers(("X-Remote-Group", "g"))) is None


def test_the_verified_subject_is_read_from_the_scope() -> None:
    subject = ((("organizationName", "x"),), (("commonName", "front-proxy-client"),))
    scope = {"extensions": {"tls": {"client_cert_subject": subject}}}
    assert front_proxy.common_name(scope) == "front-proxy-client"
    assert front_proxy.common_name({}) is None
