import type http from 'node:http';
import type { Logger } from '../../service-kit/src/index.js';
import type { TokenIssuer } from './auth/jwt.js';
import type { LoginGuard } from './auth/login-guard.js';
import type { CredentialLookup } from './auth/sigv4-verify.js';
import type { BucketAccess } from './middleware/bucket-access.js';
import type { ObjectLayer, ObjectOwnership } from '../../object-model/src/index.js';
import type { ControlPlaneClient } from './clients/control-plane.js';
import type { TrustedProxies } from '../../service-kit/src/trusted-proxies.js';

/** Everything a handler may use: the object layer, the accounts, and the gateway's own settings. */
export interface GatewayDeps {
  /** Every S3 bucket, object and multipart operation: S3 handlers make one call here. */
  objects: ObjectLayer;
  /** Users, credentials and the recycle bin (/login and /admin). */
  controlPlane: ControlPlaneClient;
  buckets: BucketAccess;
  /** The user with an e-mail address (any case), what S3's grants by e-mail name; UnresolvableGrantByEmailAddress when none has it. */
  userByEmail: (email: string) => Promise<{ username: string }>;
  credentials: CredentialLookup;
  tokens: TokenIssuer;
  /** POST /login's failure limits and password-check slots. */
  loginGuard: LoginGuard;
  logger: Logger;
  region: string;
  /** Whether AWS Signature Version 2 is accepted (STRATA_SIGV2): headers, presigned queries and forms. */
  signatureV2: boolean;
  rootUser: string;
  /** The object ownership of a bucket created without `x-amz-object-ownership` (STRATA_DEFAULT_OBJECT_OWNERSHIP). */
  defaultObjectOwnership: ObjectOwnership;
  /** Client addresses and schemes as trusted proxies forward them. */
  proxies: TrustedProxies;
  /** Origin clients reach the gateway at; when unset, taken from each request's Host header and scheme. */
  publicUrl?: string;
  /** Lifetime of the presigned URL a Bearer GET is redirected to. */
  redirectSeconds: number;
  /**
   * Counts a request against its user's rate limit once the handler has authenticated it (form uploads:
   * flow control ran before their signed policy named the user); throws SlowDown when exhausted.
   */
  admitUser?: (res: http.ServerResponse, user: string) => Promise<void>;
}
