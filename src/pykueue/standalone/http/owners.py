"""Whose job is it: the Unix user a submitted Job will run as, decided when it is submitted.

The server writes the answer on the Job (``pykueue.io/run-as-uid``,
``pykueue.io/run-as-user``, ``pykueue.io/submitted-by``) and nobody else may:
every ``pykueue.io/`` annotation a caller sends is dropped first. The rules:

1. a server that is not root runs every job as itself (it cannot do otherwise);
2. a caller on the Unix socket is the user the kernel names (root's jobs run as root);
3. an identity mapped to a Unix user (``spec.unixUser``) runs as that user;
4. any other identity runs as a system user made for it on first use,
   ``<userPrefix><identity>`` (``createUsers: false`` refuses instead).

No identity may be mapped to root or to the server's own user: a token would
then be worth the server's privileges.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from pykueue.api import governance
from pykueue.api.access import (
    RUN_AS_UID_ANNOTATION,
    RUN_AS_USER_ANNOTATION,
    SUBMITTED_BY_ANNOTATION,
    Identity,
)
from pykueue.standalone.node import accounts
from pykueue.standalone.node.isolation import SERVER_ANNOTATION_PREFIX
from pykueue.store.base import Manifest

RUNNABLE_KINDS = frozenset({"Job", "JobSet"})
DEFAULT_USER_PREFIX = "pykueue-"


@dataclass
class Owners:
    switch_users: bool = field(default_factory=accounts.can_switch_users)
    server: accounts.RunAs = field(default_factory=accounts.current)
    user_prefix: str = DEFAULT_USER_PREFIX
    create_users: bool = True
    home: Path = Path("/nonexistent")

    async def run_as(self, identity: Identity) -> accounts.RunAs:
        if not self.switch_users:
            return self.server
        if identity.uid is not None:
            found = accounts.by_uid(identity.uid)
            if found is None:
                raise accounts.AccountError(f"uid {identity.uid} has no entry in the user database")
            return found
        if identity.unix_user:
            found = accounts.by_name(identity.unix_user)
            if found is None:
                raise accounts.AccountError(
                    f"identity {identity.name} is mapped to Unix user {identity.unix_user}, which does not exist"
                )
            return found
        if not self.create_users:
            raise accounts.AccountError(
                f"identity {identity.name} is not mapped to a Unix user and this server does not create users; "
                f"an admin can map it: pykueue token create {identity.name} --unix-user USER"
            )
        name = accounts.user_name_for(self.user_prefix, identity.name)
        return await asyncio.to_thread(accounts.ensure_user, name, self.home)

    def check_mapping(self, unix_user: str) -> accounts.RunAs:
        """The user an identity may be mapped to; AccountError when it does not exist or is privileged."""
        found = accounts.by_name(unix_user)
        if found is None:
            raise accounts.AccountError(f"unixUser {unix_user}: no such user on this machine")
        if found.uid == 0 or found.uid == self.server.uid:
            raise accounts.AccountError(
                f"unixUser {unix_user}: an identity may not be mapped to root or to the server's own user "
                "(its token would be worth the server's privileges)"
            )
        return found


def strip_server_annotations(manifest: Manifest) -> None:
    meta = manifest.get("metadata") or {}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        # The governance policies (docs/governance.md) are the user's to write; the rest is the server's.
        policies = governance.KEYS_BY_KIND.get(str(manifest.get("kind")), frozenset())
        for key in [
            k for k in annotations if str(k).startswith(SERVER_ANNOTATION_PREFIX) and k not in policies
        ]:
            del annotations[key]
        if not annotations:
            del meta["annotations"]


def stamp(manifest: Manifest, identity: Identity, owner: accounts.RunAs) -> None:
    annotations = manifest.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[SUBMITTED_BY_ANNOTATION] = identity.name
    annotations[RUN_AS_UID_ANNOTATION] = str(owner.uid)
    annotations[RUN_AS_USER_ANNOTATION] = owner.name
