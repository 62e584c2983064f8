#!/usr/bin/env python3
"""relay.py PORT: run by qemu (guestfwd ... -cmd:) once per guest connection to a --reverse port, with the guest's
stream on fd 0. Dials host 127.0.0.1:PORT, and only that, and copies bytes both ways, one thread per direction so
that a slow reader on one side never stops the other. A side's end of stream is passed on as a half-close; an error
on either side ends both."""
import socket
import sys
import threading


def pump(source, sink, done):
    try:
        while True:
            data = source.recv(1 << 16)
            if not data:
                sink.shutdown(socket.SHUT_WR)
                return
            sink.sendall(data)
    except OSError:
        for side in (source, sink):
            try:
                side.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    finally:
        done.release()


def main():
    port = int(sys.argv[1])
    guest = socket.socket(fileno=0)
    guest.setblocking(True)
    try:
        host = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError as error:
        sys.stderr.write("relay.py: cannot connect to 127.0.0.1:%d: %s\n" % (port, error))
        return 1
    host.settimeout(None)
    host.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    done = threading.Semaphore(0)
    for source, sink in ((guest, host), (host, guest)):
        threading.Thread(target=pump, args=(source, sink, done), daemon=True).start()
    done.acquire()
    done.acquire()
    return 0


if __name__ == "__main__":
    sys.exit(main())
