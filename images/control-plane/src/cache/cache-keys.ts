/** Cache keys, in one place so that writers and readers agree. */
export const cacheKeys = {
  /** An admin job's record, read by every replica (admin-jobs.ts). */
  adminJob: (id: string) => `strata:admin-job:{${id}}`,
  /** The id of the job of a kind that a replica runs (admin-jobs.ts). */
  runningAdminJob: (kind: string) => `strata:admin-job-running:{${kind}}`,
};
