"""PostgreSQL store: many agent workers on many hosts sharing one memory.

psycopg 3 with a ``psycopg_pool`` connection pool; thread-safe and usable from many
processes. Writes to one namespace are serialised by a transaction-scoped advisory lock,
so ``seq`` order is commit order and every reader sees a prefix of one history. The
library creates and migrates its tables itself (``schema_version`` table, migrations run
under an advisory lock, so many workers may start at once). Tables live in a PostgreSQL
schema of your choice (default ``flexamem``). Namespaces are always bound parameters.

:class:`PostgresStore` (sync) and :class:`AsyncPostgresStore` (asyncio, on an
``AsyncConnectionPool``) run the same plans from :mod:`.postgres_plans` on the same
tables, so they can share one database and see each other's writes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from ..model.schema import MergedRecord, Note, Piece, Unit
from .errors import StoreURLError
from .postgres_plans import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Plan,
    Plans,
    SchemaVersionError,
    T,
    arun_plan,
    check_schema_name,
    run_plan,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "AsyncPostgresStore", "PostgresStore", "SchemaVersionError",
           "check_schema_name", "split_url"]


def _import_psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("PostgresStore needs psycopg 3 and psycopg_pool: "
                          "pip install 'flexamem[postgres]'") from exc
    return psycopg


def split_url(url: str) -> tuple[str, dict[str, Any]]:
    """A store URL's libpq conninfo and our options: ``schema``, ``pool_min``, ``pool_max``.

    ``postgresql://u@h/db?schema=s&pool_max=4&sslmode=require`` gives the conninfo
    ``postgresql://u@h/db?sslmode=require`` and ``{"schema": "s", "max_size": 4}``.
    A key=value DSN is returned unchanged with no options.
    """
    if not isinstance(url, str) or "://" not in url:
        return url, {}
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    options: dict[str, Any] = {}
    if "schema" in params:
        options["schema"] = params.pop("schema")
    for name, option in (("pool_min", "min_size"), ("pool_max", "max_size")):
        if name in params:
            value = params.pop(name)
            try:
                options[option] = int(value)
            except ValueError:
                raise StoreURLError(f"{name} must be an integer, got {value!r}") from None
    base = url.split("?", 1)[0]  # not urlunsplit: it drops the "//" of postgresql:///db
    return (f"{base}?{urlencode(params)}" if params else base), options


def postgres_url(conninfo: str, schema: str, pool: dict[str, Any]) -> str:
    """A ``postgresql://`` URL for a conninfo (URL or key=value DSN) with our options added."""
    psycopg = _import_psycopg()
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(conninfo).items() if v is not None}
    netloc = ""
    if "host" in params and "/" not in params["host"] and "," not in params["host"]:  # else a socket dir
        user = params.pop("user", None)
        password = params.pop("password", None)
        auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "") + "@" if user else ""
        host = params.pop("host")
        netloc = auth + (f"[{host}]" if ":" in host else host) + (f":{params.pop('port')}" if "port" in params else "")
    dbname = quote(params.pop("dbname", ""), safe="")
    params.update(schema=schema, pool_min=str(pool["min_size"]), pool_max=str(pool["max_size"]))
    return f"postgresql://{netloc}/{dbname}?" + urlencode(sorted(params.items()))


class PostgresStore:
    """Append-only store in PostgreSQL behind a connection pool (sync, thread-safe).

    ``conninfo`` is a libpq URL or DSN (``postgresql://user@host:5432/db``). A store that
    crosses a ``fork`` opens a fresh pool in the child.
    """

    def __init__(self, conninfo: str, *, schema: str = "flexamem", min_size: int = 1,
                 max_size: int = 8, timeout: float = 30.0) -> None:
        _import_psycopg()
        self.conninfo = conninfo
        self._plans = Plans(schema)
        self.schema = self._plans.schema
        self._pool_args = {"min_size": min_size, "max_size": max_size, "timeout": timeout}
        self._lock = threading.Lock()
        self._pool: Any = None
        self._pid = -1
        self._run(self._plans.migrate())

    @property
    def url(self) -> str:
        """The URL this store reopens under (``open_store``): the conninfo plus our options."""
        return postgres_url(self.conninfo, self.schema, self._pool_args)

    def _connection(self) -> Any:
        if self._pool is None or self._pid != os.getpid():
            with self._lock:
                if self._pool is None or self._pid != os.getpid():
                    from psycopg_pool import ConnectionPool

                    self._pool = ConnectionPool(self.conninfo, open=True, name="flexamem",
                                                kwargs={"autocommit": False}, **self._pool_args)
                    self._pid = os.getpid()
        return self._pool.connection()

    def _run(self, plan: Plan[T]) -> T:
        with self._connection() as conn:
            return run_plan(conn, plan)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None and self._pid == os.getpid():
                self._pool.close()
            self._pool = None

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Store protocol ---------------------------------------------------------------

    def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool:
        return self._run(self._plans.write_unit(namespace, unit, note, pieces))

    def has_unit(self, namespace: str, key: str) -> bool:
        return self._run(self._plans.has_unit(namespace, key))

    def get_unit(self, namespace: str, key: str) -> Unit:
        return self._run(self._plans.get_unit(namespace, key))

    def notes(self, namespace: str) -> list[Note]:
        return self._run(self._plans.notes(namespace))

    def keys_and_notes_from(self, namespace: str, start: int) -> tuple[list[str], list[Note]]:
        """The keys of the namespace's notes in write order and its notes from position
        ``start`` on, in one read (``NotesFrom``)."""
        return self._run(self._plans.keys_and_notes_from(namespace, start))

    def parents(self, namespace: str) -> dict[str, str | None]:
        return self._run(self._plans.parents(namespace))

    def pieces(self, namespace: str, unit_key: str) -> list[Piece]:
        return self._run(self._plans.pieces(namespace, unit_key))

    def iter_pieces(self, namespace: str) -> list[Piece]:
        return self._run(self._plans.iter_pieces(namespace))

    def get_merged(self, namespace: str, key: str) -> MergedRecord | None:
        return self._run(self._plans.get_merged(namespace, key))

    def put_merged(self, namespace: str, merged: MergedRecord) -> None:
        self._run(self._plans.put_merged(namespace, merged))

    def merged_records(self, namespace: str) -> list[MergedRecord]:
        return self._run(self._plans.merged_records(namespace))

    def put_piece_vectors(self, namespace: str, unit_key: str, vectors: Mapping[int, np.ndarray]) -> None:
        """Fill the own vectors of a unit's pieces that have none (``PieceVectorFill``)."""
        self._run(self._plans.put_piece_vectors(namespace, unit_key, vectors))

    def namespace_version(self, namespace: str) -> str:
        return self._run(self._plans.namespace_version(namespace))

    def get_index_snapshot(self, namespace: str) -> bytes | None:
        return self._run(self._plans.get_index_snapshot(namespace))

    def put_index_snapshot(self, namespace: str, data: bytes) -> None:
        self._run(self._plans.put_index_snapshot(namespace, data))

    def get_request_state(self, namespace: str) -> bytes | None:
        return self._run(self._plans.get_request_state(namespace))

    def put_request_state(self, namespace: str, data: bytes) -> None:
        self._run(self._plans.put_request_state(namespace, data))

    def namespaces(self) -> list[str]:
        return self._run(self._plans.namespaces())

    # -- forgetting -------------------------------------------------------------------

    def delete_unit(self, namespace: str, key: str) -> bool:
        """Forget a unit: note, pieces, embedding, links to it, merged records covering it."""
        return self._run(self._plans.delete_unit(namespace, key))

    def delete_namespace(self, namespace: str) -> int:
        """Forget a whole namespace (a thread or a tenant); returns the units deleted."""
        return self._run(self._plans.delete_namespace(namespace))


class AsyncPostgresStore:
    """The ``async`` twin of :class:`PostgresStore` on an ``AsyncConnectionPool``.

    Same tables, plans and guarantees; every Store and ForgettingStore method is a
    coroutine. ``store = await AsyncPostgresStore.open(url)`` (the URL may carry
    ``schema``, ``pool_min`` and ``pool_max`` like :func:`~.url.open_store`) then
    ``await store.close()``, or ``async with AsyncPostgresStore(conninfo) as store:``.
    """

    def __init__(self, conninfo: str, *, schema: str = "flexamem", min_size: int = 1,
                 max_size: int = 8, timeout: float = 30.0) -> None:
        _import_psycopg()
        from psycopg_pool import AsyncConnectionPool

        self.conninfo = conninfo
        self._plans = Plans(schema)
        self.schema = self._plans.schema
        self._pool = AsyncConnectionPool(conninfo, open=False, name="flexamem-async",
                                         kwargs={"autocommit": False}, min_size=min_size,
                                         max_size=max_size, timeout=timeout)
        self._pool_args = {"min_size": min_size, "max_size": max_size}
        self._started = False

    @property
    def url(self) -> str:
        """The same URL a sync :class:`PostgresStore` on these tables has."""
        return postgres_url(self.conninfo, self.schema, self._pool_args)

    @classmethod
    async def open(cls, url: str, **kwargs: Any) -> AsyncPostgresStore:
        """Open the pool and create or migrate the tables; ``kwargs`` override URL options."""
        conninfo, options = split_url(url)
        store = cls(conninfo, **{**options, **kwargs})
        await store._start()
        return store

    async def _start(self) -> None:
        self._started = True
        await self._pool.open()
        try:
            await self._run(self._plans.migrate())
        except BaseException:
            await self._pool.close()
            raise

    async def _run(self, plan: Plan[T]) -> T:
        async with self._pool.connection() as conn:
            return await arun_plan(conn, plan)

    async def close(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> AsyncPostgresStore:
        if not self._started:
            await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- Store protocol, async --------------------------------------------------------

    async def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool:
        return await self._run(self._plans.write_unit(namespace, unit, note, pieces))

    async def has_unit(self, namespace: str, key: str) -> bool:
        return await self._run(self._plans.has_unit(namespace, key))

    async def get_unit(self, namespace: str, key: str) -> Unit:
        return await self._run(self._plans.get_unit(namespace, key))

    async def notes(self, namespace: str) -> list[Note]:
        return await self._run(self._plans.notes(namespace))

    async def keys_and_notes_from(self, namespace: str, start: int) -> tuple[list[str], list[Note]]:
        return await self._run(self._plans.keys_and_notes_from(namespace, start))

    async def parents(self, namespace: str) -> dict[str, str | None]:
        return await self._run(self._plans.parents(namespace))

    async def pieces(self, namespace: str, unit_key: str) -> list[Piece]:
        return await self._run(self._plans.pieces(namespace, unit_key))

    async def iter_pieces(self, namespace: str) -> list[Piece]:
        return await self._run(self._plans.iter_pieces(namespace))

    async def get_merged(self, namespace: str, key: str) -> MergedRecord | None:
        return await self._run(self._plans.get_merged(namespace, key))

    async def put_merged(self, namespace: str, merged: MergedRecord) -> None:
        await self._run(self._plans.put_merged(namespace, merged))

    async def merged_records(self, namespace: str) -> list[MergedRecord]:
        return await self._run(self._plans.merged_records(namespace))

    async def put_piece_vectors(self, namespace: str, unit_key: str, vectors: Mapping[int, np.ndarray]) -> None:
        await self._run(self._plans.put_piece_vectors(namespace, unit_key, vectors))

    async def namespace_version(self, namespace: str) -> str:
        return await self._run(self._plans.namespace_version(namespace))

    async def get_index_snapshot(self, namespace: str) -> bytes | None:
        return await self._run(self._plans.get_index_snapshot(namespace))

    async def put_index_snapshot(self, namespace: str, data: bytes) -> None:
        await self._run(self._plans.put_index_snapshot(namespace, data))

    async def get_request_state(self, namespace: str) -> bytes | None:
        return await self._run(self._plans.get_request_state(namespace))

    async def put_request_state(self, namespace: str, data: bytes) -> None:
        await self._run(self._plans.put_request_state(namespace, data))

    async def namespaces(self) -> list[str]:
        return await self._run(self._plans.namespaces())

    # -- forgetting, async ------------------------------------------------------------

    async def delete_unit(self, namespace: str, key: str) -> bool:
        """Forget a unit: note, pieces, embedding, links to it, merged records covering it."""
        return await self._run(self._plans.delete_unit(namespace, key))

    async def delete_namespace(self, namespace: str) -> int:
        """Forget a whole namespace (a thread or a tenant); returns the units deleted."""
        return await self._run(self._plans.delete_namespace(namespace))
