"""A TCP relay in front of a real Redis-protocol server that can cut one reply.

Stopping Redis (SIGTERM) can run a command, persist its effect and exit before the reply
is written: the client sees its connection close and cannot know the command ran. The
relay makes that one moment happen on demand: every byte goes through unchanged until
``cut_reply_containing`` is armed; the first reply holding those bytes is then swallowed
and that client's connection closed, after the server has done the work.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class ReplyCutter:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self._needle: bytes | None = None
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="relay-accept", daemon=True).start()

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def cut_reply_containing(self, needle: bytes) -> None:
        with self._lock:
            self._needle = needle

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        self.listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                if self._closed:
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies and self._take(data):
                    break  # swallowed: the server ran the command, the client never hears of it
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _take(self, data: bytes) -> bool:
        with self._lock:
            if self._needle is None or self._needle not in data:
                return False
            self._needle = None
        self.cut.set()
        return True
