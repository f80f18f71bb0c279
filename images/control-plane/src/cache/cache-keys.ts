/** Cache keys, in one place so that writers and invalidators agree. */
export const cacheKeys = {
  bucket: (name: string) => `strata:bucket:{${name}}`,
};
