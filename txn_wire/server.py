"""The asyncio server of ``txnlog serve``: framing, dispatch, long-poll, shutdown.

- Frames: a 4-byte big-endian length, then the request. A length below a request header or
  above the connection's cap closes that connection before the body is read: the cap is
  ``sasl_max_receive_size`` (sasl.server.max.receive.size, 512 KiB) until a SASL connection
  has authenticated, ``max_request_bytes`` (socket.request.max.bytes, 100 MiB) after, and
  on a PLAINTEXT listener. So does a frame whose lengths do not fit in it
  (``frame_bounds``, checked before kio reads it), a frame kio cannot decode, an unknown API
  key or an unsupported version (except ApiVersions, answered as Kafka answers it:
  ``api_versions``). Bad input closes one connection, never the server, and never reaches
  the log.
- One request at a time per connection, answered in order (Kafka's ordering guarantee);
  connections run concurrently. Engine calls run on worker threads (``asyncio.to_thread``),
  so a slow fsync or a held partition lock never stalls the event loop; so does the decoding
  of a frame over 64 KiB, so that a large one stalls no other connection.
- Fetch long-polls: answered once ``min_bytes`` of records are there (capped as Kafka caps
  them, ``fetch``; 0 or no partition: at once), or ``max_wait`` has passed, looking at the
  partitions' ends every ``fetch_poll_interval_ms``; other processes append to the directory
  without telling us, so looking is the only way to learn of it.
- Listeners (``listeners``): one server accepts on a PLAINTEXT and a SASL_PLAINTEXT address,
  as Kafka's ``listeners``; each connection keeps its listener's protocol, and the broker it
  is told of in Metadata is the address it connected to.
- Authentication and authorization (R-12): on a SASL_PLAINTEXT listener each connection must
  authenticate by SASL against the SCRAM credential store before anything but ApiVersions
  (``connection_auth``); the same store answers DescribeUserScramCredentials and
  AlterUserScramCredentials on every listener (``admin_scram``). With an ``authorizer`` each
  request is checked against the ACLs before its handler runs, and the refused parts are
  answered with Kafka's authorization error codes (``authorize``). CreateAcls,
  DescribeAcls and DeleteAcls edit and list the ACL file the authorizer is read from
  (``admin_acls``); without one they answer SECURITY_DISABLED.
- Shutdown (``stop``): stop accepting; requests being handled are answered (long polls answer
  at once with what they have); idle connections are closed; then the log is closed. Every
  acknowledged append was written before its answer, so nothing acknowledged is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from txn_log import Log
from txn_wire import api_versions
from txn_wire.acl import Authorizer
from txn_wire.admin_acls import (
    AclAdmin,
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
)
from txn_wire.admin_configs import handle_alter_configs, handle_incremental_alter_configs
from txn_wire.admin_groups import handle_delete_groups
from txn_wire.admin_partitions import handle_create_partitions
from txn_wire.admin_scram import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from txn_wire.admin_topics import (
    handle_create_topics,
    handle_delete_topics,
    handle_describe_configs,
)
from txn_wire.authorize import authorize
from txn_wire.broker import Broker, ServeConfig
from txn_wire.codec import (
    LENGTH,
    REQUEST_PREFIX,
    MalformedRequestError,
    Plain,
    Request,
    decode_request,
    encode_response,
    peek_prefix,
)
from txn_wire.connection_auth import ConnectionAuth
from txn_wire.delete_records import handle_delete_records
from txn_wire.fetch import end_offsets, fetch_limits, read_fetch
from txn_wire.group_coordinator import GroupCoordinator
from txn_wire.group_membership import LoopMembership
from txn_wire.list_offsets import handle_list_offsets
from txn_wire.listeners import Listener, SecurityProtocol
from txn_wire.metadata import Address, handle_find_coordinator, handle_metadata
from txn_wire.offset_delete import handle_offset_delete
from txn_wire.produce import handle_produce
from txn_wire.scram_users import ScramCredentialStore
from txn_wire.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_end_txn,
    handle_init_producer_id,
    handle_offset_commit,
    handle_offset_fetch,
    handle_txn_offset_commit,
)

logger = logging.getLogger(__name__)
WORKER_THREADS = 32
DECODE_ON_LOOP_MAX_BYTES = 64 * 1024
"""Frames larger than this are decoded on a worker thread: a large request (one with millions
of partition indexes takes seconds to decode) must not stall every other connection."""

_client_reader: contextvars.ContextVar[asyncio.StreamReader] = contextvars.ContextVar("reader")
"""The connection a request came on (each connection task has its own context)."""

Handler = Callable[["WireServer", Request, Address], Awaitable[Plain | None]]


def _blocking(function: Callable[..., Plain | None], *, with_address: bool = False) -> Handler:
    """A handler that runs ``function(broker, request[, address])`` on a worker thread."""

    async def handler(server: WireServer, request: Request, address: Address) -> Plain | None:
        args: tuple[Any, ...] = (server.broker, request)
        if with_address:
            args += (address,)
        return await asyncio.to_thread(function, *args)

    return handler


def _acl_api(function: Callable[[AclAdmin | None, Request], Plain]) -> Handler:
    """An ACL API's handler: ``function(the server's ACL file or None, request)`` on a worker
    thread (it reads and replaces the file)."""

    async def handler(server: WireServer, request: Request, address: Address) -> Plain:
        return await asyncio.to_thread(function, server.acl_admin, request)

    return handler


def _on_credentials(function: Callable[[ScramCredentialStore, Request], Plain]) -> Handler:
    """A handler that runs ``function(credential store, request)`` on a worker thread (it
    reads, and may rewrite, the users file)."""

    async def handler(server: WireServer, request: Request, address: Address) -> Plain:
        return await asyncio.to_thread(function, server.credentials, request)

    return handler


async def _fetch(server: WireServer, request: Request, address: Address) -> Plain:
    """One read, then more reads until min_bytes, max_wait or shutdown (long poll)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.body.get("max_wait", 0)) / 1000
    min_bytes = fetch_limits(request.body)[1]  # 0: answered at once, as Kafka does
    interval = server.broker.config.fetch_poll_interval_ms / 1000
    while True:
        result = await asyncio.to_thread(read_fetch, server.broker, request)
        if result.size >= min_bytes or result.has_error or not request.body["topics"]:
            return result.body
        ends = await asyncio.to_thread(end_offsets, server.broker, request)
        while True:
            if loop.time() >= deadline or server.stopping.is_set() or _client_left():
                return result.body
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(server.stopping.wait(), interval)
            if await asyncio.to_thread(end_offsets, server.broker, request) != ends:
                break


def _client_left() -> bool:
    """Whether the client closed its side: a long poll for it stops at once."""
    reader = _client_reader.get(None)
    return reader is not None and reader.at_eof()


async def _offset_commit(server: WireServer, request: Request, address: Address) -> Plain:
    """OffsetCommit from a group member is checked against the group's generation first."""
    body = request.body
    code = server.groups.check_commit(
        body["group_id"],
        body.get("member_id", ""),
        body.get("generation_id_or_member_epoch", -1),
        instance_id=body.get("group_instance_id"),
    )
    if code:
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p["partition_index"], "error_code": code}
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }
    return await asyncio.to_thread(handle_offset_commit, server.broker, request)


async def _txn_offset_commit(server: WireServer, request: Request, address: Address) -> Plain:
    """TxnOffsetCommit: the engine's commit, whose KIP-447 member check runs on this loop."""
    membership = LoopMembership(server.groups, asyncio.get_running_loop())
    return await asyncio.to_thread(handle_txn_offset_commit, server.broker, request, membership)


async def _join_group(server: WireServer, request: Request, address: Address) -> Plain:
    return await server.groups.join_group(request)


async def _sync_group(server: WireServer, request: Request, address: Address) -> Plain:
    return await server.groups.sync_group(request)


async def _heartbeat(server: WireServer, request: Request, address: Address) -> Plain:
    return server.groups.heartbeat(request)


async def _leave_group(server: WireServer, request: Request, address: Address) -> Plain:
    return server.groups.leave_group(request)


async def _offset_delete(server: WireServer, request: Request, address: Address) -> Plain:
    return await handle_offset_delete(server.broker, server.groups, request)


async def _describe_groups(server: WireServer, request: Request, address: Address) -> Plain:
    with_offsets = await asyncio.to_thread(_groups_with_offsets, server.broker)
    return server.groups.describe_groups(request, with_offsets)


async def _list_groups(server: WireServer, request: Request, address: Address) -> Plain:
    with_offsets = await asyncio.to_thread(_groups_with_offsets, server.broker)
    return server.groups.list_groups(request, with_offsets)


def _groups_with_offsets(broker: Broker) -> set[str]:
    """The groups holding committed offsets in the engine's store (it reads the log: off the
    event loop)."""
    return set(broker.log.group_offsets.groups())


HANDLERS: dict[int, Handler] = {
    0: _blocking(handle_produce),
    1: _fetch,
    2: _blocking(handle_list_offsets),
    3: _blocking(handle_metadata, with_address=True),
    8: _offset_commit,
    9: _blocking(handle_offset_fetch),
    10: _blocking(handle_find_coordinator, with_address=True),
    11: _join_group,
    12: _heartbeat,
    13: _leave_group,
    14: _sync_group,
    15: _describe_groups,
    16: _list_groups,
    19: _blocking(handle_create_topics),
    20: _blocking(handle_delete_topics),
    21: _blocking(handle_delete_records),
    22: _blocking(handle_init_producer_id),
    24: _blocking(handle_add_partitions_to_txn),
    25: _blocking(handle_add_offsets_to_txn),
    26: _blocking(handle_end_txn),
    28: _txn_offset_commit,
    29: _acl_api(handle_describe_acls),
    30: _acl_api(handle_create_acls),
    31: _acl_api(handle_delete_acls),
    32: _blocking(handle_describe_configs),
    33: _blocking(handle_alter_configs),
    37: _blocking(handle_create_partitions),
    42: _blocking(handle_delete_groups),
    44: _blocking(handle_incremental_alter_configs),
    47: _offset_delete,
    50: _on_credentials(handle_describe_user_scram_credentials),
    51: _on_credentials(handle_alter_user_scram_credentials),
}
"""api key → its handler; ApiVersions and the SASL APIs are the connection's (``_answer``)."""


class WireServer:
    """A Kafka protocol listener over one open ``Log``. Use from one event loop."""

    def __init__(
        self,
        log: Log,
        credentials: ScramCredentialStore,
        config: ServeConfig | None = None,
        *,
        authorizer: Authorizer | Callable[[], Authorizer] | None = None,
        acl_file: Path | None = None,
    ) -> None:
        """``credentials``: the SCRAM credential store, read at each new connection to a
        SASL_PLAINTEXT listener (so credentials changed on disk apply without a restart) and
        by the SCRAM credential APIs. ``authorizer``: the ACLs, or what gives them at each
        request (a ``WatchedFile``'s ``current``, so ``txnlog acls`` applies to the next
        request); None: no ACLs. ``acl_file``: the file ``authorizer`` reads, which CreateAcls
        and DeleteAcls edit and DescribeAcls lists; without it (or without an authorizer) they
        answer SECURITY_DISABLED."""
        self.broker = Broker(log, config or ServeConfig())
        self.credentials = credentials
        self.authorizer: Callable[[], Authorizer] | None = (
            (lambda: authorizer) if isinstance(authorizer, Authorizer) else authorizer
        )
        self.acl_admin = (
            AclAdmin(Path(acl_file), self.authorizer)
            if acl_file is not None and self.authorizer is not None
            else None
        )
        settings = self.broker.config
        self.groups = GroupCoordinator(
            settings.group_min_session_timeout_ms,
            settings.group_max_session_timeout_ms,
            settings.group_initial_rebalance_delay_ms,
            log.group_offsets.activity,
        )
        self.stopping = asyncio.Event()
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def start(self, listeners: Sequence[Listener]) -> list[Listener]:
        """Listen on each listener; returns them as bound (port 0 picks a free port)."""
        bound = []
        for listener in listeners:
            accept = functools.partial(self._connection, listener.protocol)
            server = await asyncio.start_server(accept, listener.host, listener.port)
            self._servers.append(server)
            host, port = server.sockets[0].getsockname()[:2]
            bound.append(Listener(listener.protocol, host, port))
        self.groups.start()
        return bound

    async def stop(self, grace_s: float = 30.0) -> None:
        """Stop accepting, let in-flight requests answer, close connections (not the log)."""
        self.stopping.set()
        for server in self._servers:
            server.close()
        self.groups.stop()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace_s)
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _connection(
        self,
        protocol: SecurityProtocol,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        _client_reader.set(reader)
        sockname = writer.get_extra_info("sockname")
        address: Address = (sockname[0], sockname[1])
        peer = writer.get_extra_info("peername")
        auth = ConnectionAuth(self.credentials.users() if protocol.sasl else None, peer)
        try:
            while not self.stopping.is_set():
                frame = await self._read_frame(reader, auth)
                if frame is None or self.stopping.is_set():
                    break  # a request read after the stop began is failed: never started
                self._begin()  # no await since the read: ``stop`` waits for this request
                try:
                    if auth.raw_tokens:
                        response: bytes | None = await auth.raw_token(frame)
                    else:
                        response = await self._dispatch(frame, address, auth)
                finally:
                    self._end()
                if response is not None:
                    writer.write(response)
                    await writer.drain()
                if auth.close_after:
                    break
        except MalformedRequestError as error:
            logger.info("closing connection from %s: %s", peer, error)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away, maybe mid-request: nothing of it was applied
        except asyncio.CancelledError:
            pass  # ``stop`` closes idle connections (waiting for their next request)
        except Exception:  # a bug in a handler must not take the server down
            logger.exception("closing connection from %s after an unexpected error", peer)
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read_frame(self, reader: asyncio.StreamReader, auth: ConnectionAuth) -> bytes | None:
        """The next frame's bytes (None at a clean end of stream); a length outside the
        connection's bounds raises MalformedRequestError before any of the body is read."""
        try:
            prefix = await reader.readexactly(LENGTH.size)
        except asyncio.IncompleteReadError:
            return None
        (length,) = LENGTH.unpack(prefix)
        limit, setting = auth.max_receive_bytes(self.broker.config)
        smallest = 0 if auth.raw_tokens else REQUEST_PREFIX.size  # a bare SASL token may be empty
        if length < smallest or length > limit:
            raise MalformedRequestError(
                f"frame of {length} bytes refused (at least {smallest}, at most {setting} {limit})"
            )
        return await reader.readexactly(length)

    async def _dispatch(self, frame: bytes, address: Address, auth: ConnectionAuth) -> bytes | None:
        api_key, api_version, correlation_id = peek_prefix(frame)
        sasl = auth.sasl
        if not api_versions.is_supported(api_key, api_version, sasl=sasl):
            if api_key == api_versions.API_VERSIONS:
                body = api_versions.api_versions_body(api_versions.UNSUPPORTED_VERSION, sasl=sasl)
                return encode_response(api_key, 0, correlation_id, body)
            raise MalformedRequestError(f"api key {api_key} version {api_version} unsupported")
        auth.check_allowed(api_key)
        if len(frame) > DECODE_ON_LOOP_MAX_BYTES:  # a big frame decodes off the event loop
            request = await asyncio.to_thread(decode_request, frame)
        else:
            request = decode_request(frame)
        answer = await self._answer(request, address, auth)
        if answer is None:
            return None
        return encode_response(api_key, api_version, correlation_id, answer)

    async def _answer(
        self, request: Request, address: Address, auth: ConnectionAuth
    ) -> Plain | None:
        if request.api_key == api_versions.API_VERSIONS:
            return api_versions.api_versions_body(sasl=auth.sasl)
        if request.api_key == api_versions.SASL_HANDSHAKE:
            return auth.handshake(request)
        if request.api_key == api_versions.SASL_AUTHENTICATE:
            return await auth.authenticate(request)
        principal = auth.principal
        if self.authorizer is None or principal is None:  # None: ApiVersions before SASL
            return await HANDLERS[request.api_key](self, request, address)
        guard = authorize(self.authorizer(), principal, request)
        if guard.refused:
            logger.info("%s refused api key %d (not authorized)", principal, request.api_key)
            return guard.answer
        return guard.merge(await HANDLERS[request.api_key](self, guard.request, address))

    def _begin(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def _end(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()


async def serve(
    log: Log,
    listeners: Sequence[Listener],
    credentials: ScramCredentialStore,
    config: ServeConfig | None = None,
    *,
    on_listening: Callable[[list[Listener]], None] = lambda bound: None,
    metrics_port: int | None = None,
    on_metrics: Callable[[str, int], None] = lambda host, port: None,
    authorizer: Authorizer | Callable[[], Authorizer] | None = None,
    acl_file: Path | None = None,
) -> None:
    """Serve ``log`` on ``listeners`` until SIGTERM or SIGINT, then stop cleanly (the caller
    closes the log). With ``metrics_port`` (0: a free one), ``GET /metrics`` on the first
    listener's host answers the seeds' metrics in the Prometheus text format
    (``metrics_http``)."""
    import signal
    from concurrent.futures import ThreadPoolExecutor

    from txn_wire.metrics_http import MetricsServer

    loop = asyncio.get_running_loop()
    # engine calls (appends with fsync, long-poll looks at the log ends) share these threads;
    # the default pool (CPUs + 4) would let a few slow fsyncs hold up every fetch
    loop.set_default_executor(ThreadPoolExecutor(WORKER_THREADS, "txnlog-serve"))
    server = WireServer(log, credentials, config, authorizer=authorizer, acl_file=acl_file)
    # the handlers go in before the address is printed: whoever reads it may stop us at once
    stop_requested = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop_requested.set)
    bound = await server.start(listeners)
    on_listening(bound)
    metrics = MetricsServer(log)
    if metrics_port is not None:
        on_metrics(*await metrics.start(bound[0].host, metrics_port))
    await stop_requested.wait()
    await metrics.stop()
    await server.stop()
