-- Shards: the engine's state is divided into a fixed number of shards, each with its own
-- lease (holder, addr, epoch, lease_until: the leader lease of before, once per shard).
-- The rows are made by the first replica that opens the database (shards.go), with the
-- count it was started with: shard 0's buckets are the root's (so a database made before
-- shards is shard 0 of one), shard i's live under the bucket `root` made for it.
CREATE TABLE duraton_shards (
  shard       int PRIMARY KEY,
  root        bigint      NOT NULL,
  holder      text        NOT NULL DEFAULT '',
  addr        text        NOT NULL DEFAULT '',
  epoch       bigint      NOT NULL DEFAULT 0,
  lease_until timestamptz NOT NULL DEFAULT '-infinity'
);
-- The replicas alive now: each renews its row; shards are shared out among the live ones.
CREATE TABLE duraton_replicas (
  id         text PRIMARY KEY,
  addr       text        NOT NULL,
  seen_until timestamptz NOT NULL
);
-- A leader of an older binary, still running while this one migrates, is fenced: its
-- writes check duraton_leader's epoch, which moves on here. Shard 0 starts above it.
UPDATE duraton_leader SET epoch = epoch + 1, holder = '', lease_until = '-infinity';
