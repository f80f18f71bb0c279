/** Request headers as Node gives them (names lower case; a repeated header as a list). */
export type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** A request header's first value; undefined when absent. Every service reads its request headers through this one. */
export function header(req: { headers: RequestHeaders }, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
