from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from forgeml.auth.oidc import (
    IdTokenError,
    IssuerError,
    LoginState,
    OidcCodeError,
    OidcConfig,
    OidcStateError,
    ProviderMetadata,
    check_provider_url,
    finish_login,
    load_oidc_config,
    roles_for_groups,
    start_login,
    verify_id_token,
)
from forgeml.core.errors import ConfigError
from tests.auth._oidc_provider import CLIENTS, REDIRECT_URI, Provider, browser_sign_in, run_provider

SECRET_ENV = "FORGEML_TEST_OIDC_CLIENT_SECRET"
GROUP_ROLES = {
    "vision": {"ml-engineers": "developer", "vision-leads": "admin"},
    "nlp": {"ml-engineers": "viewer"},
    "finance": {"accountants": "owner"},
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    yield from run_provider(tmp_path_factory.mktemp("oidc"))


def _config(provider: Provider, client_id: str = "forgeml", **fields: Any) -> OidcConfig:
    return OidcConfig(
        issuer=provider.issuer,
        client_id=client_id,
        client_secret_env=SECRET_ENV,
        redirect_uri=REDIRECT_URI,
        group_roles=GROUP_ROLES,
        allow_private_network=True,  # the test provider is on loopback, over http
        **fields,
    )


@pytest.fixture
def config(provider: Provider, monkeypatch: pytest.MonkeyPatch) -> OidcConfig:
    monkeypatch.setenv(SECRET_ENV, CLIENTS["forgeml"])
    return _config(provider)


@pytest.fixture(scope="module")
def published(provider: Provider) -> tuple[ProviderMetadata, dict[str, Any]]:
    discovery = httpx.get(f"{provider.issuer}/.well-known/openid-configuration").json()
    metadata = ProviderMetadata.model_validate(discovery)
    return metadata, httpx.get(metadata.jwks_uri).json()


def _raw_tokens(
    provider: Provider, metadata: ProviderMetadata, client_id: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[LoginState, dict[str, Any]]:
    """Sign alice in for `client_id` and redeem the code by hand: the token response as issued."""
    monkeypatch.setenv(SECRET_ENV, CLIENTS[client_id])
    url, login = start_login(_config(provider, client_id))
    query = browser_sign_in(url, "alice", "correct horse battery staple")
    reply = httpx.post(
        metadata.token_endpoint,
        data={
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": login.code_verifier,
        },
        auth=(client_id, CLIENTS[client_id]),
    )
    assert reply.status_code == 200, reply.text
    return login, reply.json()


def _claims(id_token: str) -> dict[str, Any]:
    payload = id_token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_sign_in_returns_the_identity_with_roles_from_groups(config: OidcConfig) -> None:
    url, login = start_login(config)
    query = browser_sign_in(url, "alice", "correct horse battery staple")
    identity = finish_login(config, login, query)
    assert identity.subject == "alice"
    assert identity.issuer == config.issuer
    assert identity.email == "alice@example.org"
    assert identity.name == "Alice Liddell"
    assert identity.groups == ("ml-engineers", "vision-leads")
    assert identity.roles_by_project == {"vision": "admin", "nlp": "viewer"}


def test_a_user_without_groups_gets_no_role(config: OidcConfig) -> None:
    url, login = start_login(config)
    identity = finish_login(config, login, browser_sign_in(url, "bob", "hunter2 hunter2"))
    assert (identity.subject, identity.groups, dict(identity.roles_by_project)) == ("bob", (), {})


def test_the_authorization_url_carries_pkce_s256_state_and_nonce(config: OidcConfig) -> None:
    url, login = start_login(config, clock=lambda: 1234.5)
    params = {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}
    digest = hashlib.sha256(login.code_verifier.encode()).digest()
    assert params["code_challenge"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert params["code_challenge_method"] == "S256"
    assert (params["state"], params["nonce"]) == (login.state, login.nonce)
    assert params["client_id"] == "forgeml"
    assert params["redirect_uri"] == REDIRECT_URI
    assert params["scope"] == "openid email profile groups"
    assert 43 <= len(login.code_verifier) <= 128
    assert login.created_at == 1234.5
    assert "client_secret" not in url and CLIENTS["forgeml"] not in url


def test_a_wrong_password_gets_no_code(config: OidcConfig) -> None:
    url, _ = start_login(config)
    with pytest.raises(AssertionError, match="401"):
        browser_sign_in(url, "alice", "wrong")


def test_a_callback_with_another_state_is_refused(config: OidcConfig) -> None:
    url, login = start_login(config)
    query = browser_sign_in(url, "alice", "correct horse battery staple")
    forged = login.model_copy(update={"state": "state-of-another-browser"})
    with pytest.raises(OidcStateError, match="does not match the sign-in") as caught:
        finish_login(config, forged, query)
    assert caught.value.http_status == 401


def test_a_replayed_code_is_refused(config: OidcConfig) -> None:
    url, login = start_login(config)
    query = browser_sign_in(url, "alice", "correct horse battery staple")
    finish_login(config, login, query)
    with pytest.raises(OidcCodeError, match=r"refused the authorization code \(invalid_grant\)"):
        finish_login(config, login, query)


def test_a_code_redeemed_without_its_pkce_verifier_is_refused(config: OidcConfig) -> None:
    url, login = start_login(config)
    query = browser_sign_in(url, "alice", "correct horse battery staple")
    stolen = login.model_copy(update={"code_verifier": "x" * 64})
    with pytest.raises(OidcCodeError, match="invalid_grant"):
        finish_login(config, stolen, query)


def test_a_sign_in_older_than_its_ttl_is_refused(config: OidcConfig) -> None:
    login = LoginState(state="s", nonce="n", code_verifier="v" * 43, created_at=1000.0)
    query = {"state": "s", "code": "c"}
    with pytest.raises(OidcStateError, match="took over 600 s"):
        finish_login(config, login, query, clock=lambda: 1000.0 + 601)


def test_the_providers_refusal_in_the_callback_is_one_error(config: OidcConfig) -> None:
    login = LoginState(state="s", nonce="n", code_verifier="v" * 43, created_at=0.0)
    query = {
        "state": "s",
        "error": "access_denied",
        "error_description": "User said no",
        "iss": config.issuer,
    }
    with pytest.raises(OidcCodeError, match=r"refused the sign-in \(access_denied\): User said no"):
        finish_login(config, login, query, clock=lambda: 1.0)


def test_a_callback_naming_another_issuer_is_refused(config: OidcConfig) -> None:
    login = LoginState(state="s", nonce="n", code_verifier="v" * 43, created_at=0.0)
    query = {"state": "s", "code": "c", "iss": "https://evil.example"}
    with pytest.raises(OidcStateError, match=r"comes from 'https://evil\.example'"):
        finish_login(config, login, query, clock=lambda: 1.0)


def test_a_callback_without_the_iss_its_provider_always_sends_is_refused(
    config: OidcConfig,
) -> None:
    url, login = start_login(config)
    query = browser_sign_in(url, "alice", "correct horse battery staple")
    assert query.pop("iss") == config.issuer
    with pytest.raises(OidcStateError, match=r"lacks the issuer \(iss\)"):
        finish_login(config, login, query)


def test_a_token_issued_to_another_client_is_refused(
    provider: Provider, config: OidcConfig, published: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    metadata, jwks = published
    login, tokens = _raw_tokens(provider, metadata, "other-app", monkeypatch)
    claims = _claims(tokens["id_token"])
    assert claims["aud"] == "other-app"
    with pytest.raises(IdTokenError, match=r"issued to 'other-app'.*another audience"):
        verify_id_token(
            config,
            metadata,
            jwks,
            tokens["id_token"],
            nonce=login.nonce,
            access_token=tokens["access_token"],
            now=claims["iat"],
        )


@pytest.fixture(scope="module")
def forgeml_tokens(
    provider: Provider, published: Any
) -> Iterator[tuple[LoginState, dict[str, Any]]]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _raw_tokens(provider, published[0], "forgeml", monkeypatch)


def _verify(
    config: OidcConfig, published: Any, tokens: Any, id_token: str, **changes: Any
) -> dict[str, Any]:
    login, issued = tokens
    metadata, jwks = published
    arguments = {
        "nonce": login.nonce,
        "access_token": issued["access_token"],
        "now": _claims(issued["id_token"])["iat"],
    }
    return verify_id_token(config, metadata, jwks, id_token, **{**arguments, **changes})


def test_the_real_token_verifies(config: OidcConfig, published: Any, forgeml_tokens: Any) -> None:
    claims = _verify(config, published, forgeml_tokens, forgeml_tokens[1]["id_token"])
    assert (claims["sub"], claims["aud"], claims["iss"]) == ("alice", "forgeml", config.issuer)


def _forge(header: dict[str, Any], claims: dict[str, Any], signature: str = "") -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(claims)}.{signature}"


def test_an_unsigned_alg_none_token_is_refused(
    config: OidcConfig, published: Any, forgeml_tokens: Any
) -> None:
    unsigned = _forge({"alg": "none", "typ": "JWT"}, _claims(forgeml_tokens[1]["id_token"]))
    with pytest.raises(IdTokenError, match="signed with 'none'"):
        _verify(config, published, forgeml_tokens, unsigned)


def test_a_token_signed_with_the_client_secret_is_refused(
    config: OidcConfig, published: Any, forgeml_tokens: Any
) -> None:
    key = OctKey.import_key(CLIENTS["forgeml"])
    hs256 = jwt.encode({"alg": "HS256"}, _claims(forgeml_tokens[1]["id_token"]), key)
    with pytest.raises(IdTokenError, match="signed with 'HS256'"):
        _verify(config, published, forgeml_tokens, hs256)


def test_a_token_signed_by_another_key_is_refused(
    config: OidcConfig, published: Any, forgeml_tokens: Any
) -> None:
    key = RSAKey.generate_key(2048, parameters={"kid": "test-rs256"})
    forged = jwt.encode(
        {"alg": "RS256", "kid": "test-rs256"}, _claims(forgeml_tokens[1]["id_token"]), key
    )
    with pytest.raises(IdTokenError, match="signature does not verify"):
        _verify(config, published, forgeml_tokens, forged)


def test_a_token_with_another_nonce_is_refused(
    config: OidcConfig, published: Any, forgeml_tokens: Any
) -> None:
    with pytest.raises(IdTokenError, match="nonce is not this sign-in's"):
        _verify(config, published, forgeml_tokens, forgeml_tokens[1]["id_token"], nonce="other")


def test_a_token_from_another_issuer_setting_is_refused(
    config: OidcConfig, published: Any, forgeml_tokens: Any
) -> None:
    elsewhere = config.model_copy(update={"issuer": "http://127.0.0.1:1"})
    with pytest.raises(IdTokenError, match="issued by"):
        _verify(elsewhere, published, forgeml_tokens, forgeml_tokens[1]["id_token"])


def test_an_expired_token_is_refused_at_exp_plus_the_skew(
    config: OidcConfig, published: Any, forgeml_tokens: Any
) -> None:
    id_token = forgeml_tokens[1]["id_token"]
    expiry = _claims(id_token)["exp"]
    _verify(config, published, forgeml_tokens, id_token, now=expiry + config.clock_skew_s - 1)
    with pytest.raises(IdTokenError, match="expired"):
        _verify(config, published, forgeml_tokens, id_token, now=expiry + config.clock_skew_s)


def test_a_token_issued_in_the_future_is_refused(
    config: OidcConfig, published: Any, forgeml_tokens: Any
) -> None:
    id_token = forgeml_tokens[1]["id_token"]
    early = _claims(id_token)["iat"] - config.clock_skew_s - 1
    with pytest.raises(IdTokenError, match="iat lies in the future"):
        _verify(config, published, forgeml_tokens, id_token, now=early)


def test_garbage_for_a_token_is_one_error(
    config: OidcConfig, published: Any, forgeml_tokens: Any
) -> None:
    with pytest.raises(IdTokenError, match="not a JWT"):
        _verify(config, published, forgeml_tokens, "%%%.x.y")
    with pytest.raises(IdTokenError, match="no ID token"):
        _verify(config, published, forgeml_tokens, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.2:{port}/jwks", "issuer's origin"),
        ("http://127.0.0.1:1/jwks", "issuer's origin"),
        ("https://127.0.0.1:{port}/jwks", "issuer's origin"),
        ("http://user:pw@127.0.0.1:{port}/jwks", "issuer's origin"),
        ("http://169.254.169.254/latest/meta-data/", "issuer's origin"),
    ],
)
def test_a_url_off_the_issuers_origin_is_refused(
    config: OidcConfig, url: str, problem: str
) -> None:
    port = urlsplit(config.issuer).port
    with pytest.raises(IssuerError, match=problem):
        check_provider_url(url.format(port=port), config)


@pytest.mark.parametrize(
    "issuer",
    [
        "https://2130706433/",
        "https://0x7f.1/",
        "https://[::ffff:127.0.0.1]/",
        "https://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
        "https://169.254.169.254/",
        "https://10.1.2.3/",
    ],
)
def test_a_provider_on_a_private_address_needs_allow_private_network(issuer: str) -> None:
    config = OidcConfig(issuer=issuer, client_id="c", redirect_uri=REDIRECT_URI)
    with pytest.raises(IssuerError, match="non-public address"):
        check_provider_url(issuer + ".well-known/openid-configuration", config)


def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    config = OidcConfig(issuer="https://idp.example.com", client_id="c", redirect_uri=REDIRECT_URI)
    url = "https://idp.example.com/jwks"
    assert (
        check_provider_url(url, config, resolver=lambda host, port: ["93.184.216.34"])
        == "93.184.216.34"
    )
    with pytest.raises(IssuerError, match=r"non-public address 10\.0\.0\.7"):
        check_provider_url(url, config, resolver=lambda host, port: ["93.184.216.34", "10.0.0.7"])


def test_plain_http_needs_allow_private_network() -> None:
    config = OidcConfig(issuer="http://idp.example.com", client_id="c", redirect_uri=REDIRECT_URI)
    with pytest.raises(IssuerError, match="over https"):
        check_provider_url(
            "http://idp.example.com/jwks", config, resolver=lambda h, p: ["93.184.216.34"]
        )


def test_extra_origins_admit_a_separate_token_host() -> None:
    config = OidcConfig(
        issuer="https://accounts.example.com",
        client_id="c",
        redirect_uri=REDIRECT_URI,
        extra_origins=["https://oauth2.example.com"],
    )
    public = lambda host, port: ["93.184.216.34"]  # noqa: E731
    assert check_provider_url("https://oauth2.example.com/token", config, public) == "93.184.216.34"
    with pytest.raises(IssuerError, match="issuer's origin"):
        check_provider_url("https://oauth2.example.com:8443/token", config, public)


def test_roles_for_groups_takes_the_highest_role_per_project() -> None:
    roles = roles_for_groups(GROUP_ROLES, ["vision-leads", "ml-engineers", "unknown"])
    assert roles == {"vision": "admin", "nlp": "viewer"}
    assert roles_for_groups(GROUP_ROLES, []) == {}


def test_the_client_secret_comes_from_its_variable(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"{SECRET_ENV} is unset"):
        start_login(_config(provider))


def test_the_config_loads_from_yaml_and_names_a_bad_key(tmp_path: Path) -> None:
    good = tmp_path / "oidc.yaml"
    good.write_text(
        "issuer: https://idp.example.com\nclient_id: forgeml\n"
        f"redirect_uri: {REDIRECT_URI}\ngroup_roles: {{vision: {{ml: developer}}}}\n"
    )
    assert load_oidc_config(good).group_roles == {"vision": {"ml": "developer"}}
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("developer", "emperor"))
    with pytest.raises(ConfigError, match=r"key 'group_roles.vision.ml'"):
        load_oidc_config(bad)
    no_openid = tmp_path / "scopes.yaml"
    no_openid.write_text(good.read_text() + "scopes: [email]\n")
    with pytest.raises(ConfigError, match="must include 'openid'"):
        load_oidc_config(no_openid)


def test_the_config_loads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGEML_OIDC_ISSUER", "https://idp.example.com")
    monkeypatch.setenv("FORGEML_OIDC_CLIENT_ID", "forgeml")
    monkeypatch.setenv("FORGEML_OIDC_REDIRECT_URI", REDIRECT_URI)
    monkeypatch.setenv("FORGEML_OIDC_GROUP_ROLES", '{"vision": {"ml": "viewer"}}')
    monkeypatch.setenv("FORGEML_OIDC_CLIENT_SECRET", "not a field: the secret's default variable")
    config = load_oidc_config()
    assert (config.issuer, config.group_roles) == (
        "https://idp.example.com",
        {"vision": {"ml": "viewer"}},
    )
    monkeypatch.delenv("FORGEML_OIDC_ISSUER")
    with pytest.raises(ConfigError, match="missing required key 'issuer'"):
        load_oidc_config()


class _Documents(BaseHTTPRequestHandler):
    """Serves whatever the test puts in `routes`: path -> (status, headers, body)."""

    routes: ClassVar[dict[str, tuple[int, dict[str, str], bytes]]] = {}

    def do_GET(self) -> None:
        status, headers, body = self.routes.get(self.path, (404, {}, b"{}"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def fake_issuer() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Documents)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _serve_discovery(issuer: str, status: int = 200, body: Any = None, **headers: str) -> None:
    document = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/auth",
        "token_endpoint": f"{issuer}/token",
        "jwks_uri": f"{issuer}/jwks",
    }
    data = json.dumps(document if body is None else body).encode()
    _Documents.routes = {"/.well-known/openid-configuration": (status, headers, data)}


def _fake_config(issuer: str) -> OidcConfig:
    return OidcConfig(
        issuer=issuer,
        client_id="forgeml",
        client_secret_env=None,
        redirect_uri=REDIRECT_URI,
        allow_private_network=True,
    )


def test_a_discovery_document_naming_another_issuer_is_refused(fake_issuer: str) -> None:
    _serve_discovery("https://idp.example.com")
    with pytest.raises(
        IssuerError, match=r"names the issuer 'https://idp\.example\.com'"
    ) as caught:
        start_login(_fake_config(fake_issuer))
    assert caught.value.http_status == 502


def test_a_redirecting_discovery_document_is_not_followed(fake_issuer: str) -> None:
    _serve_discovery(fake_issuer, status=302, location="http://169.254.169.254/latest/meta-data/")
    with pytest.raises(IssuerError, match="answered 302, not 200"):
        start_login(_fake_config(fake_issuer))


def test_a_token_endpoint_off_the_issuers_origin_is_never_called(fake_issuer: str) -> None:
    document = {
        "issuer": fake_issuer,
        "authorization_endpoint": f"{fake_issuer}/auth",
        "token_endpoint": "http://169.254.169.254/latest/meta-data/",
        "jwks_uri": f"{fake_issuer}/jwks",
    }
    _serve_discovery(fake_issuer, body=document)
    login = LoginState(state="s", nonce="n", code_verifier="v" * 43, created_at=0.0)
    with pytest.raises(IssuerError, match="only from the issuer's origin"):
        finish_login(
            _fake_config(fake_issuer), login, {"state": "s", "code": "c"}, clock=lambda: 1.0
        )


def test_a_provider_without_pkce_s256_is_refused(fake_issuer: str) -> None:
    document = {
        "issuer": fake_issuer,
        "authorization_endpoint": f"{fake_issuer}/auth",
        "token_endpoint": f"{fake_issuer}/token",
        "jwks_uri": f"{fake_issuer}/jwks",
        "code_challenge_methods_supported": ["plain"],
    }
    _serve_discovery(fake_issuer, body=document)
    with pytest.raises(IssuerError, match="does not offer PKCE S256"):
        start_login(_fake_config(fake_issuer))


def test_a_discovery_document_missing_a_field_is_one_error(fake_issuer: str) -> None:
    _serve_discovery(fake_issuer, body={"issuer": fake_issuer})
    with pytest.raises(IssuerError, match="missing required key 'authorization_endpoint'"):
        start_login(_fake_config(fake_issuer))


def test_an_unreachable_provider_is_one_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        config = _fake_config(f"http://127.0.0.1:{probe.getsockname()[1]}")
        with pytest.raises(IssuerError, match=r"discovery document .* failed"):
            start_login(config)


def test_an_oversized_discovery_document_is_refused(fake_issuer: str) -> None:
    _serve_discovery(fake_issuer, body={"issuer": fake_issuer, "padding": "x" * 1_000_001})
    with pytest.raises(IssuerError, match="is over 1000000 bytes"):
        start_login(_fake_config(fake_issuer))


def test_a_discovery_document_that_is_not_json_is_one_error(fake_issuer: str) -> None:
    _Documents.routes = {"/.well-known/openid-configuration": (200, {}, b"<html>sign in</html>")}
    with pytest.raises(IssuerError, match="is not JSON"):
        start_login(_fake_config(fake_issuer))
