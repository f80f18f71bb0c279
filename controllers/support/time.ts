/** Kubernetes timestamps are RFC 3339 in whole seconds ("2026-01-02T03:04:05Z"). */
export function rfc3339(at: Date | string | number = new Date()): string {
  return new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
