-- The fence of the data plane's orphan sweep (images/data-plane/src/gc/cleanup-job.ts): a blob file no
-- row names is recorded here before it is deleted, and strata_commit_objects refuses an item whose new
-- locator is recorded, so a commit that resumes after the sweep took its file (a primary frozen past
-- the sweep's grace) fails instead of committing a row that points at missing bytes. Locators are
-- generated and never reused, so a row is only ever consulted by such a late commit.
CREATE TABLE swept_locators (
  backend_key text NOT NULL,
  locator     text NOT NULL,
  swept_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (backend_key, locator)
);
