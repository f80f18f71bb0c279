-- Strata object store schema: tables and indexes only. The stored functions are in ../functions/, one
-- file each, defined again after the versioned migrations on every start (migrate.ts). Owned by the
-- control plane; the data plane writes blobs, object_info and outbox rows in its own transactions (see
-- hack/adr/0001-object-store-internal-api.md).

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
  created_at timestamptz NOT NULL DEFAULT now(),
  -- The bucket's configurations, each NULL when it has none: lifecycle rules (a JSON array, applied by
  -- the daily job), CORS rules (a JSON array; without them the gateway's server-wide policy applies),
  -- tags (a JSON array of {key, value}).
  lifecycle  jsonb,
  cors       jsonb,
  tags       jsonb
);

-- A deleted bucket's name is held for its last owner for a while (S3 answers OperationAborted too):
-- gateways and data planes cache bucket records by name for seconds, so a name re-created at once by
-- another account could still be resolved to the old owner on another replica, and reach the new
-- owner's objects. Creating a bucket by another account waits until every such cache has expired.
-- One row per recently deleted name; rows older than the hold are removed by the next bucket create.
CREATE TABLE bucket_name_holds (
  name       text COLLATE "C" PRIMARY KEY,
  owner      text NOT NULL,
  deleted_at timestamptz NOT NULL
);
CREATE INDEX bucket_name_holds_deleted_at ON bucket_name_holds (deleted_at);

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
  created_at  timestamptz NOT NULL DEFAULT now(),
  -- Inline blobs: the bytes of small bodies on the filesystem backend, written by the object's own
  -- commit (no file, fsync, rename or unlink per small PUT; see InlineBlobs in
  -- images/data-plane/src/backends/fs-backend.ts). NULL for blobs whose bytes are on a backend.
  data        bytea
);
-- EXTERNAL: stored out of line and uncompressed, so that the many reference-count updates of a blob row
-- never copy its bytes.
ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL;
-- The instant-upload lookup: one index read on (backend, md5, size).
CREATE UNIQUE INDEX blobs_content ON blobs (backend_key, md5, size) WHERE md5 IS NOT NULL AND state = 'LIVE';
CREATE INDEX blobs_unreferenced ON blobs (id) WHERE ref_count = 0;
-- The data plane's orphan sweep asks which blob files on a backend a row still names (by locator).
CREATE INDEX blobs_by_locator ON blobs (backend_key, locator);

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
  deleted_at    timestamptz,
  -- Written by the version's own commit, so that it is never visible without them; each NULL when the
  -- version has none. Tags (x-amz-tagging): a JSON array of {key, value} in the order given. Headers
  -- kept besides the content type and user metadata (Cache-Control, Content-Disposition,
  -- Content-Encoding, Content-Language, Expires) and the flexible checksum (x-amz-checksum-<algorithm>,
  -- x-amz-checksum-type): a JSON object by lower-case header name.
  tags          jsonb,
  headers       jsonb,
  -- A multipart object's parts: their sizes in part order (GetObject/HeadObject `partNumber`) and, for an
  -- upload with a checksum algorithm, their checksums (GetObjectAttributes). NULL for an object uploaded whole.
  part_sizes     bigint[],
  part_checksums text[]
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
