"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), v1-3: Kafka's ACL admin APIs over
the ACL file of ``txnlog serve --acl-file`` (R-12), as Kafka's ``AclApis`` answers them.

- Without an ACL file the server has no authorizer: every creation, the description and every
  filter are SECURITY_DISABLED (54), with Kafka's messages.
- Authorization (``authorize``): DescribeAcls needs Describe on the cluster, CreateAcls and
  DeleteAcls Alter on it (Alter implies Describe); a refusal is CLUSTER_AUTHORIZATION_FAILED
  (31) for every creation, the description or every filter, and changes nothing.
- CreateAcls: each creation becomes a file rule (``acl_binding.creation_rule``) or is refused
  INVALID_REQUEST (42) naming what; then every accepted rule is appended in one edit
  (``acl_file.add_rules``: the editor lock, parse-before-write, a durable atomic replace). A
  rule the file already holds is a success not written again, as Kafka answers an existing
  ACL. Validate first, then change (STYLE 3): a request whose creations are all refused never
  touches the file.
- DescribeAcls: the rules in force (the authorizer's, re-read when the file changes; a file
  broken by hand leaves the last good rules in force, and those are what is described) that
  match the filter, grouped by resource pattern, each with host ``*``. A filter with an
  unknown code is INVALID_REQUEST. Super users are no rules: they are not listed.
- DeleteAcls: every filter is read first (an unknown code is INVALID_REQUEST for that filter
  alone); then, in one edit under the editor lock, every line whose rule a valid filter
  matches is removed (``acl_file.remove_matching``: comments and other lines kept), and each
  filter is answered with the ACLs it matched (one matched by two filters is listed under
  both, as Kafka lists it).
- A file that cannot be edited (broken by hand, unwritable) is UNKNOWN_SERVER_ERROR (-1) for
  the creations or filters that would have changed it, the message naming the file and why.

Every edit goes to the file the server watches (``watched_file``), so this server and any other
serving the same file apply it at their next request. Runs on worker threads; editors (this
server's handlers, other servers, ``txnlog acls``) serialise on the editor lock, so none loses
another's change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from txn_log.errors import TxnLogError
from txn_wire.acl import AclFileError, AclRule, Authorizer
from txn_wire.acl_binding import (
    AclBinding,
    AclBindingFilter,
    InvalidAclError,
    creation_rule,
    filter_of,
)
from txn_wire.acl_file import add_rules, remove_matching
from txn_wire.codec import Plain, Request

logger = logging.getLogger(__name__)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
UNKNOWN_SERVER_ERROR = -1
INVALID_REQUEST = 42
SECURITY_DISABLED = 54
NO_AUTHORIZER = {
    DESCRIBE_ACLS: "No Authorizer is configured on the broker",
    CREATE_ACLS: "No Authorizer is configured.",
    DELETE_ACLS: "No Authorizer is configured.",
}
"""Kafka's SECURITY_DISABLED messages (``AclApis``), per API."""


@dataclass(frozen=True)
class AclAdmin:
    """The server's ACL file: where CreateAcls and DeleteAcls write, and the rules in force
    (``current``, the ``WatchedFile`` the authorizer comes from), which DescribeAcls lists."""

    path: Path
    current: Callable[[], Authorizer]


def whole_request_error(request: Request, code: int, message: str) -> Plain:
    """The answer giving ``code`` to every creation, the description or every filter of an
    ACL request (Kafka's ``getErrorResponse``)."""
    if request.api_key == DESCRIBE_ACLS:
        return {"error_code": code, "error_message": message, "resources": []}
    if request.api_key == CREATE_ACLS:
        return {"results": [_error(code, message) for _ in request.body["creations"]]}
    return {
        "filter_results": [
            {**_error(code, message), "matching_acls": []} for _ in request.body["filters"]
        ]
    }


def _error(code: int, message: str | None) -> Plain:
    return {"error_code": code, "error_message": message}


def handle_create_acls(acls: AclAdmin | None, request: Request) -> Plain:
    if acls is None:
        return whole_request_error(request, SECURITY_DISABLED, NO_AUTHORIZER[CREATE_ACLS])
    results: list[Plain | None] = []  # None: accepted
    accepted: list[AclRule] = []
    for creation in request.body["creations"]:
        try:
            accepted.append(creation_rule(creation))
            results.append(None)
        except InvalidAclError as error:
            results.append(_error(INVALID_REQUEST, str(error)))
    outcome = _error(0, None)
    if accepted:
        try:
            add_rules(acls.path, accepted)
        except (AclFileError, TxnLogError, OSError) as error:
            outcome = _file_error(acls.path, error)
    return {"results": [outcome if result is None else result for result in results]}


def handle_describe_acls(acls: AclAdmin | None, request: Request) -> Plain:
    if acls is None:
        return whole_request_error(request, SECURITY_DISABLED, NO_AUTHORIZER[DESCRIBE_ACLS])
    try:
        wanted = filter_of(request.body)
    except InvalidAclError as error:
        return whole_request_error(request, INVALID_REQUEST, str(error))
    resources: dict[tuple[int, str, int], list[Plain]] = {}  # in file order
    for binding in dict.fromkeys(AclBinding.of_rule(rule) for rule in acls.current().rules):
        if wanted.matches(binding):
            key = (binding.resource_type, binding.name, binding.pattern_type)
            resources.setdefault(key, []).append(binding.entry())
    return {
        **_error(0, None),
        "resources": [
            {"resource_type": kind, "resource_name": name, "pattern_type": pattern, "acls": found}
            for (kind, name, pattern), found in resources.items()
        ],
    }


def handle_delete_acls(acls: AclAdmin | None, request: Request) -> Plain:
    if acls is None:
        return whole_request_error(request, SECURITY_DISABLED, NO_AUTHORIZER[DELETE_ACLS])
    results: list[Plain | AclBindingFilter] = []  # a filter: valid, answered once applied
    for fields in request.body["filters"]:
        try:
            results.append(filter_of(fields))
        except InvalidAclError as error:
            results.append({**_error(INVALID_REQUEST, str(error)), "matching_acls": []})
    valid = [r for r in results if isinstance(r, AclBindingFilter)]
    try:
        removed = iter(remove_matching(acls.path, [_picks(f) for f in valid]) if valid else [])
    except (AclFileError, TxnLogError, OSError) as error:
        failure = {**_file_error(acls.path, error), "matching_acls": []}
        return {"filter_results": [failure if not isinstance(r, dict) else r for r in results]}
    return {
        "filter_results": [r if isinstance(r, dict) else _deleted(next(removed)) for r in results]
    }


def _picks(wanted: AclBindingFilter) -> Callable[[AclRule], bool]:
    return lambda rule: wanted.matches(AclBinding.of_rule(rule))


def _deleted(rules: list[AclRule]) -> Plain:
    bindings = dict.fromkeys(AclBinding.of_rule(rule) for rule in rules)  # a line held twice
    return {
        **_error(0, None),
        "matching_acls": [{**_error(0, None), **binding.fields()} for binding in bindings],
    }


def _file_error(path: Path, error: Exception) -> Plain:
    logger.error("ACL file %s not changed: %s", path, error)
    return _error(UNKNOWN_SERVER_ERROR, f"ACL file {path} not changed: {error}")
