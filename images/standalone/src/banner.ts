/** What the banner of `npm start` is made from. */
export interface BannerInput {
  gatewayUrl: string;
  /** Virtual-hosted bucket domains (the first is shown). */
  s3Domains: readonly string[];
  rootUser: string;
  rootPassword: string;
  /** The password is the development default (printed), not one from STRATA_ROOT_PASSWORD (hidden). */
  defaultPassword: boolean;
  dataDir: string;
  /** URL of each running service by name. */
  urls: Record<string, string>;
  /** Notes of services, by name. */
  notes: Record<string, string[]>;
}

const LABELS: Record<string, { label: string; path?: string }> = {
  'model-server': { label: 'model server', path: '/v1' },
  'poem-app': { label: 'poem app' },
  'image-search': { label: 'image search' },
};

/**
 * The banner: every service's URL, the root credentials, and first commands that work right after the
 * start (an upload and listing with the aws CLI, the poem page, a search of the demo images).
 */
export function renderBanner(b: BannerInput): string {
  const endpoint = `--endpoint-url ${b.gatewayUrl}`;
  const secret = b.defaultPassword ? b.rootPassword : '"$STRATA_ROOT_PASSWORD"';
  const lines = [
    '',
    `Strata is running (data in ${b.dataDir}).`,
    '',
    `  S3 endpoint   ${b.gatewayUrl}  (region us-east-1, path style${b.s3Domains.length ? `, or virtual-hosted as <bucket>.${b.s3Domains[0]}` : ''})`,
    `  root user     ${b.rootUser}`,
    `  root password ${b.defaultPassword ? `${b.rootPassword}  (development default: set STRATA_ROOT_PASSWORD)` : '(from STRATA_ROOT_PASSWORD)'}`,
  ];
  for (const [name, { label, path = '' }] of Object.entries(LABELS)) {
    const url = b.urls[name];
    if (!url) continue;
    const notes = b.notes[name] ?? [];
    lines.push(`  ${label.padEnd(13)} ${url}${path}${notes.length ? `  ${notes[0]}` : ''}`);
    for (const note of notes.slice(1)) lines.push(`  ${''.padEnd(13)} ${''.padEnd(url.length + path.length)}  ${note}`);
  }
  lines.push(
    '',
    'Try:',
    `  export AWS_ACCESS_KEY_ID=${b.rootUser} AWS_SECRET_ACCESS_KEY=${secret} AWS_DEFAULT_REGION=us-east-1`,
    `  aws ${endpoint} s3 mb s3://demo`,
    `  aws ${endpoint} s3 cp README.md s3://demo/ && aws ${endpoint} s3 ls s3://demo/`,
  );
  if (b.urls['poem-app']) lines.push(`  open ${b.urls['poem-app']} in a browser and write a poem`);
  if (b.urls['image-search']) {
    lines.push(`  curl -s ${b.urls['image-search']}/search -H 'content-type: application/json' -d '{"query":"red","topk":3}'`);
  }
  lines.push('', 'Stop with Ctrl+C. More: README.md.', '');
  return lines.join('\n') + '\n';
}
