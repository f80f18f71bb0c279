-- Strata object store schema. Owned by the control plane; the data plane writes blobs, object_info
-- and outbox rows in its own transactions (see hack/adr/0001-object-store-internal-api.md).

CREATE TABLE users (
  username       text PRIMARY KEY,
  password_hash  text NOT NULL,          -- scrypt$<N>$<r>$<p>$<salt b64>$<hash b64>
  access_key     text NOT NULL UNIQUE,
  secret_key_enc text NOT NULL,          -- AES-256-GCM: <iv b64>.<tag b64>.<ciphertext b64>
  is_root        boolean NOT NULL DEFAULT false,
  created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE buckets (
  id         serial PRIMARY KEY,
  name       text COLLATE "C" NOT NULL UNIQUE,
  owner      text NOT NULL,
  backend    jsonb NOT NULL DEFAULT '{"kind":"fs"}',
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Bytes on a backend, shared by every object with the same content (reference counted).
CREATE TABLE blobs (
  id          bigserial PRIMARY KEY,
  backend_key text NOT NULL,             -- identity of the backend the bytes live on (dedupe scope)
  backend     jsonb NOT NULL,            -- the backend's config, so the bytes can be freed later
  locator     text NOT NULL,             -- backend-specific name, a generated id (never a key)
  md5         text,                      -- hex; NULL when the backend could not hash the content
  size        bigint NOT NULL,
  ref_count   integer NOT NULL DEFAULT 0 CHECK (ref_count >= 0),
  state       text NOT NULL DEFAULT 'LIVE' CHECK (state IN ('LIVE', 'FREEING')),
  created_at  timestamptz NOT NULL DEFAULT now()
);
-- The instant-upload lookup: one index read on (backend, md5, size).
CREATE UNIQUE INDEX blobs_content ON blobs (backend_key, md5, size) WHERE md5 IS NOT NULL AND state = 'LIVE';
CREATE INDEX blobs_unreferenced ON blobs (id) WHERE ref_count = 0;

-- Which owners reference a blob, and how often: an instant hit only reuses a blob its owner references.
CREATE TABLE blob_owners (
  blob_id   bigint NOT NULL REFERENCES blobs (id) ON DELETE CASCADE,
  owner     text NOT NULL,
  ref_count integer NOT NULL DEFAULT 0 CHECK (ref_count >= 0),
  PRIMARY KEY (blob_id, owner)
);

CREATE TABLE object_info (
  id            bigserial NOT NULL,
  bucket_id     integer NOT NULL,
  key           text COLLATE "C" NOT NULL,
  state         text NOT NULL CHECK (state IN ('NORMAL', 'RECYCLED', 'DELETED')),
  blob_id       bigint NOT NULL,
  size          bigint NOT NULL,
  etag          text NOT NULL,
  md5           text,
  content_type  text NOT NULL,
  user_metadata jsonb NOT NULL DEFAULT '{}',
  owner         text NOT NULL,
  last_modified timestamptz NOT NULL,
  recycled_at   timestamptz,
  deleted_at    timestamptz
) PARTITION BY LIST ((bucket_id % 2));

CREATE TABLE object_info_p0 PARTITION OF object_info FOR VALUES IN (0);
CREATE TABLE object_info_p1 PARTITION OF object_info FOR VALUES IN (1);

-- A key is NORMAL at most once per bucket. PostgreSQL refuses unique indexes on a table partitioned by
-- an expression, but a bucket's rows always land in one partition, so a unique index per partition is
-- a global guarantee.
CREATE UNIQUE INDEX object_info_p0_live_key ON object_info_p0 (bucket_id, key) WHERE state = 'NORMAL';
CREATE UNIQUE INDEX object_info_p1_live_key ON object_info_p1 (bucket_id, key) WHERE state = 'NORMAL';
CREATE INDEX object_info_id ON object_info (id);
CREATE INDEX object_info_recycled ON object_info (recycled_at) WHERE state = 'RECYCLED';
CREATE INDEX object_info_bucket_recycled ON object_info (bucket_id, key) WHERE state = 'RECYCLED';

-- Transactional outbox: written in the same transaction as the state change, relayed to the broker.
CREATE TABLE outbox (
  id          bigserial PRIMARY KEY,
  event_id    text NOT NULL UNIQUE,
  type        text NOT NULL,
  payload     jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  sent_at     timestamptz,
  attempts    integer NOT NULL DEFAULT 0
);
CREATE INDEX outbox_unsent ON outbox (id) WHERE sent_at IS NULL;

-- Idempotent consumer: an event id is applied once.
CREATE TABLE processed_events (
  event_id     text PRIMARY KEY,
  type         text NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now()
);

-- Side effect kept by the event consumer: NORMAL objects and bytes per bucket.
CREATE TABLE bucket_stats (
  bucket_id    integer PRIMARY KEY,
  object_count bigint NOT NULL DEFAULT 0,
  bytes        bigint NOT NULL DEFAULT 0
);
