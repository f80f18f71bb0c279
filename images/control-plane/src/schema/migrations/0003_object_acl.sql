-- Access control as S3 has it (issue 40): each bucket's object ownership controls, its grants and its
-- public access block, each NULL when it has none (JSON arrays, as the other configurations). Every
-- bucket, those made before this version included, has BucketOwnerEnforced (ACLs off: private to its
-- owner, as they always were here) until its owner changes it; a deleted control (NULL) is S3's
-- "no ownership controls", which honours ACLs as ObjectWriter does. An object's ACL is kept among its
-- stored headers (object_info.headers), so objects need no change.
ALTER TABLE buckets
  ADD COLUMN ownership jsonb DEFAULT '[{"objectOwnership":"BucketOwnerEnforced"}]',
  ADD COLUMN acl jsonb,
  ADD COLUMN public_access_block jsonb;
