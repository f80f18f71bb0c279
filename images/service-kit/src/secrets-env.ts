import { z } from 'zod';

/**
 * The platform's shared secrets, each parsed by one schema so that every service asks the same
 * minimum of it. A service that can do without one (or generates it) takes `.optional()` and says so
 * in its own comment. STRATA_SECRET_KEY's 16 is what the control plane has always asked: that key cannot
 * be changed (what it sealed would no longer open), so a higher minimum would lock out an installation
 * that upgrades with its key.
 */
export const secretsEnv = {
  /** The token every internal call carries (the same value in gateway, data and control plane). */
  STRATA_INTERNAL_TOKEN: z.string().min(16, 'must be at least 16 characters'),
  /** HMAC key of the login tokens POST /login issues (image search checks them with the same key). */
  STRATA_JWT_SECRET: z.string().min(32, 'must be at least 32 characters'),
  /** Seals users' SigV4 secrets and operator-made buckets' backend secret keys (the same value in data and control plane). */
  STRATA_SECRET_KEY: z.string().min(16, 'must be at least 16 characters'),
  /** SSE-S3's key-encryption key: wraps every encrypted object's data key (base64 of 32 bytes; `openssl rand -base64 32`). */
  STRATA_SSE_MASTER_KEY: z.string().refine((v) => Buffer.from(v.trim(), 'base64').length === 32, 'must be 32 bytes in base64'),
};
