"""Everything that speaks SQL: the statements (``sql/*.sql``), the catalog, the migrations'
runner, connections, the source table, each method's side tables, triggers, arrays and COPY.
Imports :mod:`simindex.core` and nothing above."""
