"""The embedded run store (files + SQLite index)."""

from spyglass.store.meta import RunMeta
from spyglass.store.reader import RunReader, iter_event_file, open_run
from spyglass.store.store import Store, default_store_path, new_run_id
from spyglass.store.writer import Checkpoint, RunWriter

__all__ = [
    "Checkpoint",
    "RunMeta",
    "RunReader",
    "RunWriter",
    "Store",
    "default_store_path",
    "iter_event_file",
    "new_run_id",
    "open_run",
]
