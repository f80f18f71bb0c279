-- The outbox relay's claim on the unsent rows it is publishing (images/data-plane/src/outbox/relay.ts).
-- Every data-plane replica runs a relay: each takes a batch by setting claimed_until (FOR UPDATE SKIP
-- LOCKED, so two relays never take the same rows at once) and marks it sent once the broker confirmed
-- it. A relay that dies mid-publish leaves its claim to run out; another relay then publishes those rows
-- again (at-least-once; the consumers are idempotent). NULL: not claimed.
ALTER TABLE outbox ADD COLUMN claimed_until timestamptz;
