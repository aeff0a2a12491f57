-- The secret replicas share to recognise each other's forwarded requests (a follower
-- proves with it that the client address it passes on is its own peer's). Two v4 UUIDs
-- (gen_random_uuid: core since PostgreSQL 13, from pg_strong_random): 244 random bits.
CREATE TABLE duraton_cluster (
  id     int  PRIMARY KEY CHECK (id = 1),
  secret text NOT NULL
);
INSERT INTO duraton_cluster (id, secret)
  VALUES (1, replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
