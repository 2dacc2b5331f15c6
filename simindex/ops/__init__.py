"""The operations: build, query, pairs, clusters, check, sync, stats. Each takes what it needs
(a connection or bind, a catalog entry, a store), never the :class:`simindex.index.Index`
facade that calls it."""
