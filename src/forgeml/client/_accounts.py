"""Client resources of accounts, projects and tokens (`/api/v1/users|projects|tokens`);
each method answers what the matching `forgeml users|projects|tokens ... --json` prints."""

from __future__ import annotations

from typing import Any

from forgeml.client._resources import Items, _Resource, _segment


class Users(_Resource):
    """People and service accounts."""

    def create(
        self,
        name: str,
        *,
        kind: str = "user",
        email: str | None = None,
        password: str | None = None,
        role: str | None = None,
        project: str = "default",
    ) -> dict[str, Any]:
        """Create an account, with `role` in `project` if given."""
        body = {"name": name, "kind": kind, "email": email, "password": password, "role": role}
        created = self._transport.post("/users", body, params={"project": project})
        return dict(created) | {"roles": {project: role} if role else {}}

    def list(self) -> Items:
        """Every account (never a password or its hash)."""
        answer: Items = self._transport.get("/users")["users"]
        return answer

    def show(self, name: str) -> dict[str, Any]:
        """One account and its role in each project."""
        return self._transport.get(f"/users/{_segment(name)}")

    def update(self, name: str, **fields: Any) -> dict[str, Any]:
        """Set `disabled`, `email` or `password` of an account."""
        return self._transport.send_json("PATCH", f"/users/{_segment(name)}", fields)


class Projects(_Resource):
    """Projects and their members' roles."""

    def create(self, name: str, owner: str | None = None) -> dict[str, Any]:
        """Create a project (the caller becomes its owner; `owner` too, if given)."""
        created: dict[str, Any] = self._transport.post("/projects", {"name": name})
        if owner is not None:
            self.add_member(name, owner, "owner")
        return created

    def list(self) -> Items:
        """Every project and its number of members."""
        answer: Items = self._transport.get("/projects")["projects"]
        return answer

    def members(self, project: str) -> Items:
        """A project's members and their roles."""
        answer: Items = self._transport.get(f"/projects/{_segment(project)}/members")["members"]
        return answer

    def add_member(self, project: str, user: str, role: str) -> dict[str, Any]:
        """Give `user` `role` in the project (replacing the one it held there)."""
        path = f"/projects/{_segment(project)}/members/{_segment(user)}"
        return self._transport.send_json("PUT", path, {"role": role})

    def remove_member(self, project: str, user: str) -> dict[str, Any]:
        """Take `user`'s role in the project away."""
        path = f"/projects/{_segment(project)}/members/{_segment(user)}"
        return self._transport.send_json("DELETE", path)


class Tokens(_Resource):
    """API tokens; a secret is shown once, by `create`."""

    def create(
        self,
        user: str,
        name: str,
        scopes: list[str] | None = None,
        expires_days: float | None = None,
    ) -> dict[str, Any]:
        """A token for `user` (the caller's own, or a service account's), with its secret."""
        body = {"name": name, "scopes": scopes, "expires_days": expires_days}
        me = self._transport.get("/auth/me")["name"]
        path = "/tokens" if user == me else f"/users/{_segment(user)}/tokens"
        return self._transport.post(path, body)

    def list(self, user: str | None = None) -> Items:
        """Tokens of `user`, or of every account the caller may manage, newest first."""
        path = f"/users/{_segment(user)}/tokens" if user else "/tokens/all"
        answer: Items = self._transport.get(path)["tokens"]
        return answer

    def revoke(self, token: str) -> dict[str, Any]:
        """Revoke a token by its prefix or id."""
        return self._transport.post(f"/tokens/{_segment(token)}/revoke")
