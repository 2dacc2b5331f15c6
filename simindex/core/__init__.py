"""Pure computation, no I/O: text to shingles, SimHash and MinHash fingerprints, index designs,
the index spec. Imports nothing from the rest of simindex but :mod:`simindex.errors`, and no
database driver."""
