// A small S3 API of one bucket for the ACL-refresh tests, counting GetObjectAcl requests: ListBuckets
// (with its owner), ListObjectsV2 (ETag, LastModified), GET object, GET ?acl (canned ACLs as the gateway
// answers them) and GET ?publicAccessBlock. Signatures are not checked.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SearchService } from '../../../images/image-search/src/search-service.js';

export type CannedAcl = 'private' | 'public-read' | 'authenticated-read';

interface StoredObject {
  body: Buffer;
  modified: Date;
  acl: CannedAcl;
}

export class AclStore {
  readonly objects = new Map<string, StoredObject>();
  /** GetObjectAcl requests answered so far. */
  aclRequests = 0;
  ignorePublicAcls = false;
  endpoint = '';
  private server: Server | null = null;
  private clock = Date.parse('2026-01-01T00:00:00Z');

  constructor(
    readonly bucket: string,
    readonly owner: string,
  ) {}

  /** PutObject (a new LastModified, a second later than the last write). */
  put(key: string, body: Buffer, acl: CannedAcl = 'private'): void {
    this.clock += 1000;
    this.objects.set(key, { body, modified: new Date(this.clock), acl });
  }

  /** PutObjectAcl: ETag and LastModified stay. */
  putAcl(key: string, acl: CannedAcl): void {
    this.objects.get(key)!.acl = acl;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://store');
      const send = (status: number, body: string | Buffer, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/xml', ...headers });
        res.end(body);
      };
      const [bucket, ...rest] = url.pathname.slice(1).split('/').map(decodeURIComponent);
      const key = rest.join('/');
      if (!bucket) {
        const buckets = `<Buckets><Bucket><Name>${this.bucket}</Name></Bucket></Buckets>`;
        return send(200, `<ListAllMyBucketsResult><Owner><ID>${this.owner}</ID></Owner>${buckets}</ListAllMyBucketsResult>`);
      }
      if (bucket !== this.bucket) return send(404, '<Error><Code>NoSuchBucket</Code></Error>');
      if (!key && url.searchParams.has('publicAccessBlock'))
        return this.ignorePublicAcls
          ? send(200, '<PublicAccessBlockConfiguration><IgnorePublicAcls>true</IgnorePublicAcls></PublicAccessBlockConfiguration>')
          : send(404, '<Error><Code>NoSuchPublicAccessBlockConfiguration</Code></Error>');
      if (!key) {
        const prefix = url.searchParams.get('prefix') ?? '';
        const contents = [...this.objects]
          .filter(([k]) => k.startsWith(prefix))
          .map(
            ([k, o]) =>
              `<Contents><Key>${k}</Key><Size>${o.body.length}</Size><ETag>"${etagOf(o.body)}"</ETag><LastModified>${o.modified.toISOString()}</LastModified></Contents>`,
          );
        return send(200, `<ListBucketResult><IsTruncated>false</IsTruncated>${contents.join('')}</ListBucketResult>`);
      }
      const object = this.objects.get(key);
      if (!object) return send(404, '<Error><Code>NoSuchKey</Code></Error>');
      if (url.searchParams.has('acl')) {
        this.aclRequests++;
        return send(200, aclXml(this.owner, object.acl));
      }
      return send(200, object.body, { 'content-type': 'application/octet-stream', etag: `"${etagOf(object.body)}"` });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.endpoint = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}

const etagOf = (body: Buffer) => createHash('md5').update(body).digest('hex');

function aclXml(owner: string, acl: CannedAcl): string {
  const group = { private: '', 'public-read': 'AllUsers', 'authenticated-read': 'AuthenticatedUsers' }[acl];
  const grants = [
    `<Grant><Grantee><ID>${owner}</ID></Grantee><Permission>FULL_CONTROL</Permission></Grant>`,
    ...(group ? [`<Grant><Grantee><URI>http://acs.amazonaws.com/groups/global/${group}</URI></Grantee><Permission>READ</Permission></Grant>`] : []),
  ];
  return `<AccessControlPolicy><Owner><ID>${owner}</ID></Owner><AccessControlList>${grants.join('')}</AccessControlList></AccessControlPolicy>`;
}

/** A stand-in for the search service that indexes every path it is handed (no encoder: what counts is who sees what). */
export function standInIndex(): SearchService {
  const ids = new Map<string, number>();
  return {
    index: { idOf: (p: string) => ids.get(p) },
    indexPaths: async (paths: readonly string[]) => {
      for (const p of paths) ids.set(p, ids.size + 1);
      return { added: paths.length, replaced: 0, skipped: [] };
    },
    removePaths: async (paths: readonly string[]) => {
      for (const p of paths) ids.delete(p);
      return [];
    },
  } as unknown as SearchService;
}
