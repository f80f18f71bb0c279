/** What `work` rejects with, or undefined where it fulfils: for asserting on an expected failure. */
export async function rejectionOf(work: Promise<unknown>): Promise<unknown> {
  try {
    await work;
  } catch (err) {
    return err;
  }
  return undefined;
}
