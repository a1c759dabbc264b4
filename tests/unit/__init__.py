"""The unit tier: pure Python, no root, no processes, no sockets, no simulator runs (fakes OK)."""
