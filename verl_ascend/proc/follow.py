"""Read a log file as it grows: the complete lines added since the last read.

A run's console and Ray's session logs are written by other processes; a line is handed out once it ends
with a newline (a half-written line waits for the rest). A file that is truncated or replaced (a log
rotated, an attempt's console started anew) is read again from its start.
"""

import os


class Follow:
    def __init__(self, path, start_at_end: bool = False):
        self.path = str(path)
        self.offset, self.inode, self.partial = 0, None, b""
        if start_at_end:
            try:
                st = os.stat(self.path)
                self.offset, self.inode = st.st_size, st.st_ino
            except OSError:
                pass

    def new_lines(self, limit: int = 1 << 20) -> list:
        """Complete lines added since the last call (at most ``limit`` bytes read per call), decoded."""
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if st.st_ino != self.inode or st.st_size < self.offset:  # a new file at that path, or truncated
            self.offset, self.inode, self.partial = 0, st.st_ino, b""
        if st.st_size == self.offset:
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(limit)
        self.offset += len(data)
        data = self.partial + data
        cut = data.rfind(b"\n") + 1
        self.partial = data[cut:]
        return data[:cut].decode(errors="replace").splitlines()
