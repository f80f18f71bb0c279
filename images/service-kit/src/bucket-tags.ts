/** A bucket's tags (PutBucketTagging) as the services keep them (JSON), in the order given. */
export interface BucketTag {
  key: string;
  value: string;
}

/** S3's limit of tags on a bucket. */
export const MAX_BUCKET_TAGS = 50;
