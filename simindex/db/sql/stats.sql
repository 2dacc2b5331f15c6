-- name: stats_now
-- An index as it is now: keys indexed (a count of its per-key table, not the last build's),
-- queued keys (the queue's entries and the inbox's: a key the triggers appended twice and no
-- worker moved yet counts twice) and the age of the oldest entry in seconds (the lag; 0 when
-- both are empty), and failed items. Exact counts: the inbox, queue and failed tables are small
-- when all is well, and
-- the per-key table is read by an index-only scan. The keys indexed include those of deleted
-- rows until the worker's sweep; the DELETE statements waiting for it come last (one row each).
SELECT (SELECT count(*) FROM {rows}),
       (SELECT count(*) FROM {queue}) + (SELECT count(*) FROM {inbox}),
       (SELECT COALESCE(EXTRACT(epoch FROM now() - min(queued_at)), 0)::float8
        FROM (SELECT queued_at FROM {queue} UNION ALL SELECT queued_at FROM {inbox}) AS e),
       (SELECT count(*) FROM {failed}),
       (SELECT count(*) FROM {deletes})
