"""Accounts: users and service accounts, projects, roles, tokens, password sign-in.

`roles` is the one table of permissions. Accounts are audited under the actor who changes
them. OIDC sign-in (`auth.oidc`) finds its account with `find_or_create_external_user`,
sets its roles with `set_project_roles`; the API's `AccountsAuthorizer.open_session` then
sets the signed session cookie, as a password sign-in does.
"""

from forgeml.auth._decide import has_accounts, held_in, permissions_in
from forgeml.auth._login import PasswordLogin, client_address, client_scheme
from forgeml.auth._passwords import Passwords
from forgeml.auth._projects import (
    DEFAULT_PROJECT,
    add_member,
    check_grant,
    create_project,
    list_members,
    list_projects,
    remove_member,
    roles_of,
    set_project_roles,
)
from forgeml.auth._session_key import load_session_key, session_key, sign, unsign
from forgeml.auth._settings import AuthSettings, get_auth_settings
from forgeml.auth._tokens import (
    PREFIX,
    Caller,
    authenticate,
    issue_token,
    list_tokens,
    read_caller,
    revoke_token,
    touch_when_due,
)
from forgeml.auth._users import (
    check_password,
    create_user,
    find_or_create_external_user,
    get_user,
    list_users,
    set_disabled,
    set_email,
    set_password,
)
from forgeml.auth.roles import ACCOUNT_PERMISSIONS, PERMISSIONS, ROLES, role_permissions

__all__ = [
    "ACCOUNT_PERMISSIONS",
    "DEFAULT_PROJECT",
    "PERMISSIONS",
    "PREFIX",
    "ROLES",
    "AuthSettings",
    "Caller",
    "PasswordLogin",
    "Passwords",
    "add_member",
    "authenticate",
    "check_grant",
    "check_password",
    "client_address",
    "client_scheme",
    "create_project",
    "create_user",
    "find_or_create_external_user",
    "get_auth_settings",
    "get_user",
    "has_accounts",
    "held_in",
    "issue_token",
    "list_members",
    "list_projects",
    "list_tokens",
    "list_users",
    "load_session_key",
    "permissions_in",
    "read_caller",
    "remove_member",
    "revoke_token",
    "role_permissions",
    "roles_of",
    "session_key",
    "set_disabled",
    "set_email",
    "set_password",
    "set_project_roles",
    "sign",
    "touch_when_due",
    "unsign",
]
