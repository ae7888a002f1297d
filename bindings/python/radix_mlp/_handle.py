"""The owned-handle base of Planner, Model and Context: freed once, by close(), ``with`` or
garbage collection; calls on one handle are serialised by its lock."""

import threading


class _Handle:
    """An owned library handle freed once, by close() or garbage collection."""

    def __init__(self, free):
        self._lock = threading.Lock()
        self._free = free  # kept on the object so __del__ works at interpreter shutdown
        self._handle = None

    def _live(self):
        if self._handle is None:
            raise ValueError("radix_mlp: the %s is closed" % type(self).__name__)
        return self._handle

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            handle, self._handle = self._handle, None
            if handle is not None and handle.value:
                self._free(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
