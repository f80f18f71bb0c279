-- Scoped access keys (issue 38): keys of a user that may only read named buckets, each optionally under a
-- key prefix (scope: {"access":"read","resources":[{"bucket","prefix"}]}); the gateway enforces the scope.
-- A key acts as its parent user and goes with it. `name` is set by the operator, which makes one key per
-- ImageIndex idempotently (PUT by name); keys made through the admin API have none.
CREATE TABLE scoped_keys (
  access_key     text PRIMARY KEY,
  name           text UNIQUE,
  parent         text NOT NULL REFERENCES users (username) ON DELETE CASCADE,
  secret_key_enc text NOT NULL,          -- AES-256-GCM, as users.secret_key_enc
  scope          jsonb NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scoped_keys_parent ON scoped_keys (parent);
