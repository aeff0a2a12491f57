-- Buckets nest like bbolt's: a bucket is (parent, name), parent 0 is the root. Ids are
-- never reused and buckets are never deleted, so replicas may cache them.
CREATE TABLE duraton_buckets (
  id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  parent bigint NOT NULL,
  name   bytea  NOT NULL,
  UNIQUE (parent, name)
);

-- Keys of a bucket in byte order (bytea compares as memcmp, bbolt's order).
CREATE TABLE duraton_kv (
  bucket bigint NOT NULL,
  k      bytea  NOT NULL,
  v      bytea  NOT NULL,
  PRIMARY KEY (bucket, k)
);
-- Queue-like churn: vacuum early.
ALTER TABLE duraton_kv SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- The leader lease: one row. epoch is the fencing token, bumped by every takeover;
-- lease_until is computed from the database clock only.
CREATE TABLE duraton_leader (
  id          int PRIMARY KEY CHECK (id = 1),
  holder      text        NOT NULL DEFAULT '',
  addr        text        NOT NULL DEFAULT '',
  epoch       bigint      NOT NULL DEFAULT 0,
  lease_until timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO duraton_leader (id) VALUES (1);
