from __future__ import annotations

import os

import pytest

from forgeml.auth import AuthSettings, Passwords, load_session_key, sign, unsign
from forgeml.auth._settings import get_auth_settings
from forgeml.core.errors import ConfigError, UsageError
from tests.auth._accounts import fast_settings


def test_a_session_key_is_made_per_install_with_mode_0600(tmp_path) -> None:
    first = load_session_key(tmp_path / "a" / "session.key")
    second = load_session_key(tmp_path / "b" / "session.key")

    assert first != second and len(first) == 32
    assert (tmp_path / "a" / "session.key").stat().st_mode & 0o777 == 0o600
    assert load_session_key(tmp_path / "a" / "session.key") == first


def test_a_key_readable_by_others_or_garbled_is_refused(tmp_path) -> None:
    path = tmp_path / "session.key"
    load_session_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="readable by other users"):
        load_session_key(path)
    os.chmod(path, 0o600)
    path.write_text("xyz")
    with pytest.raises(ConfigError, match="not 64 hex digits"):
        load_session_key(path)


def test_a_cookie_signed_by_another_install_is_refused(tmp_path) -> None:
    ours = load_session_key(tmp_path / "a.key")
    theirs = load_session_key(tmp_path / "b.key")
    cookie = sign(ours, "fmlt_0123456789abcdef_secret")
    assert unsign(ours, cookie) == "fmlt_0123456789abcdef_secret"
    assert unsign(theirs, cookie) is None
    assert unsign(ours, "fmlt_0123456789abcdef_secret") is None
    assert unsign(ours, cookie[:-1] + ("0" if cookie[-1] != "0" else "1")) is None


def test_passwords_are_argon2id_salted_and_checked(tmp_path) -> None:
    passwords = Passwords(fast_settings(tmp_path))
    first, second = passwords.hash("a long passphrase"), passwords.hash("a long passphrase")

    assert first.startswith("$argon2id$") and first != second
    assert passwords.verify(first, "a long passphrase")
    assert not passwords.verify(first, "a long passphrasE")
    assert not passwords.verify(None, "a long passphrase")
    assert not passwords.verify("not a hash", "a long passphrase")
    with pytest.raises(UsageError, match="at least 12"):
        passwords.hash("short")


def test_production_argon2_cost_is_rfc_9106_s_and_tests_lower_it_by_config() -> None:
    defaults = AuthSettings()
    assert (defaults.argon2_time_cost, defaults.argon2_memory_kib) == (3, 65536)
    assert defaults.argon2_parallelism == 4


def test_an_impossible_argon2_setting_is_one_sentence(monkeypatch) -> None:
    monkeypatch.setenv("FORGEML_AUTH_ARGON2_MEMORY_KIB", "8")
    monkeypatch.setenv("FORGEML_AUTH_ARGON2_PARALLELISM", "4")
    get_auth_settings.cache_clear()
    try:
        with pytest.raises(ConfigError, match="at least 8 KiB per lane"):
            get_auth_settings()
    finally:
        get_auth_settings.cache_clear()
