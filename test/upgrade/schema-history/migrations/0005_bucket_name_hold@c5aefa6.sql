-- A deleted bucket's name is held for its last owner for a while (S3 answers OperationAborted too):
-- gateways and data planes cache bucket records by name for seconds, so a name re-created at once by
-- another account could still be resolved to the old owner on another replica, and reach the new
-- owner's objects. Creating a bucket by another account waits until every such cache has expired.
-- One row per recently deleted name; rows older than the hold are removed by the next bucket create.
CREATE TABLE IF NOT EXISTS bucket_name_holds (
  name       text COLLATE "C" PRIMARY KEY,
  owner      text NOT NULL,
  deleted_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS bucket_name_holds_deleted_at ON bucket_name_holds (deleted_at);
