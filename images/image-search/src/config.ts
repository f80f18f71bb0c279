// Image search configuration from the environment (validated; every problem reported at once).
import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_BODY_IDLE_TIMEOUT_MS, DEFAULT_READER_IDLE_TIMEOUT_MS, env, loadConfig, secretsEnv, trustProxyEnv } from '../../service-kit/src/index.js';

/** A FAISS training knob: unset keeps DEFAULT_TRAINING's value, 0 asks for FAISS's own default. */
const trainingKnob = () => z.preprocess((v) => (v === '' ? undefined : v), z.coerce.number().int().min(0).max(1_000_000).optional());

const optional = () =>
  z
    .string()
    .optional()
    .transform((v) => (v && v.trim() ? v.trim() : undefined));

export const imageSearchSchema = z.object({
  PORT: env.port(8080),
  /** Interface to listen on (the standalone platform passes its own STRATA_HOST). */
  IMAGE_SEARCH_HOST: z.string().default('0.0.0.0'),
  LOG_LEVEL: env.logLevel(),
  /**
   * The image directory (the seed's image_file_dir). Default train2017/, or, with a bucket source,
   * source-images/ under IMAGE_SEARCH_INDEX_DIR (writable where the index state is).
   */
  IMAGE_FILE_DIR: optional(),
  /** Directory with image_encoder.onnx, text_encoder.onnx, merges.txt (+ vocab.json). */
  IMAGE_SEARCH_MODEL_DIR: optional(),
  /** s3://bucket/prefix of the model files in Strata's object store (used when set). */
  IMAGE_SEARCH_MODEL_S3_URL: optional(),
  /** Strata's S3 endpoint for model files and bucket sources. */
  IMAGE_SEARCH_S3_ENDPOINT: z.string().default('http://127.0.0.1:9000'),
  /** Region those requests are signed for. */
  IMAGE_SEARCH_S3_REGION: z.string().default('us-east-1'),
  /** Silence from the object store, ms, after which a request of the bucket source fails (the round fails; the next one retries). */
  IMAGE_SEARCH_S3_IDLE_TIMEOUT_MS: env.int(30_000, 100, 600_000),
  /** Access key of the user that reads model files and source buckets. */
  IMAGE_SEARCH_S3_ACCESS_KEY_ID: optional(),
  /** Its secret key. */
  IMAGE_SEARCH_S3_SECRET_ACCESS_KEY: optional(),
  /** onnxruntime execution provider for the CLIP encoders; cuda falls back to cpu when it cannot load. */
  IMAGE_SEARCH_EXECUTION_PROVIDER: z.enum(['cpu', 'cuda']).default('cpu'),
  /** Where model files fetched from the object store are cached. */
  IMAGE_SEARCH_MODEL_CACHE_DIR: z.string().default('data/image-search/model-cache'),
  /** Index state: main index, vectors, paths, manifest. */
  IMAGE_SEARCH_INDEX_DIR: z.string().default('data/image-search/index'),
  /** FAISS index factory string of the trained main index. @tuning */
  IMAGE_SEARCH_INDEX_STRING: z.string().default('IVF4096,PQ32x8'),
  /** IVF lists searched per query (more: better recall, slower). @tuning */
  IMAGE_SEARCH_NPROBE: env.int(32, 1, 65536),
  /** Re-rank PQ candidates by exact distance from the stored vectors. @tuning */
  IMAGE_SEARCH_RERANK: env.bool(true),
  /** PQ candidates fetched per wanted result for exact re-ranking (deeper: better recall, a little slower). @tuning */
  IMAGE_SEARCH_RERANK_FACTOR: env.int(10, 1, 1000),
  /** Results per search when the request names none. */
  IMAGE_SEARCH_TOPK: env.int(20, 1, 1000),
  /** Most results a search may ask for. */
  IMAGE_SEARCH_MAX_TOPK: env.int(100, 1, 1000),
  /** Vectors in the brute-force buffer that make the index report a merge is due. @tuning */
  IMAGE_SEARCH_BUFFER_THRESHOLD: env.int(1000, 1),
  /**
   * Cache of thumbnails and of originals converted for browsers (TIFF, HEIF), content-addressed
   * (unset: thumbnails/ in IMAGE_SEARCH_INDEX_DIR).
   */
  IMAGE_SEARCH_THUMBNAIL_DIR: optional(),
  /** Most MiB that cache holds; past it the least recently used files go. */
  IMAGE_SEARCH_THUMBNAIL_CACHE_MB: env.int(512, 1, 1_048_576),
  /** Queries in flight (searches, LLM calls, adds), all callers together: shared fairly between the callers that want them. */
  IMAGE_SEARCH_QUERY_SLOTS: env.int(32, 1, 100_000),
  /** Queries in flight of one caller (a gateway user, an admin, or an anonymous address); past it 429. */
  IMAGE_SEARCH_QUERY_SLOTS_PER_CALLER: env.int(8, 1, 100_000),
  ...trustProxyEnv,
  /** A request body that sends nothing this long, ms, is answered 408 request_timeout and its connection closed (0: no limit). */
  IMAGE_SEARCH_BODY_IDLE_TIMEOUT_MS: env.int(DEFAULT_BODY_IDLE_TIMEOUT_MS, 0, 3_600_000),
  /** An answer (image bytes) its client reads nothing of this long, ms, is cut with its connection (0: never). */
  IMAGE_SEARCH_READER_IDLE_TIMEOUT_MS: env.int(DEFAULT_READER_IDLE_TIMEOUT_MS, 0, 3_600_000),
  /** Largest image accepted by search-by-image and add, bytes. */
  IMAGE_SEARCH_MAX_UPLOAD_BYTES: env.int(10 * 1024 * 1024, 1024),
  /**
   * s3://bucket/prefix of images in Strata's object store: mirrored into IMAGE_FILE_DIR and indexed at
   * start and every IMAGE_SEARCH_SOURCE_SYNC_SECONDS (0: at start only).
   */
  IMAGE_SEARCH_SOURCE_S3_URL: optional(),
  /** Seconds between syncs of the bucket source (0: at start only). */
  IMAGE_SEARCH_SOURCE_SYNC_SECONDS: env.int(60, 0, 86_400),
  /**
   * Seconds between sync rounds that read every image's ACL (a full pass), which is how an ACL-only change
   * that grants more shows (README, "What a caller may read"); 0: every round reads every ACL.
   */
  IMAGE_SEARCH_ACL_REFRESH_S: env.int(300, 0, 86_400),
  /** RabbitMQ of the object store: object-created events in the source bucket trigger a sync at once. */
  IMAGE_SEARCH_EVENTS_AMQP_URL: optional(),
  /** Exchange the object store publishes its events to. */
  IMAGE_SEARCH_EVENTS_EXCHANGE: z.string().default('strata.events'),
  /** Queue this service binds to that exchange. */
  IMAGE_SEARCH_EVENTS_QUEUE: z.string().default('strata.image-search'),
  /** Coarse-quantizer k-means iterations while training (README, "Image search"). @tuning */
  IMAGE_SEARCH_TRAIN_NITER: trainingKnob(),
  /** PQ k-means iterations (unset: FAISS's default). @tuning */
  IMAGE_SEARCH_TRAIN_PQ_NITER: trainingKnob(),
  /** Training points per PQ centroid (unset: FAISS's default). @tuning */
  IMAGE_SEARCH_TRAIN_PQ_POINTS: trainingKnob(),
  /** OpenMP threads while training (unset: all cores). @tuning */
  IMAGE_SEARCH_TRAIN_THREADS: trainingKnob(),
  /** OpenBLAS threads while training (unset: its default). @tuning */
  IMAGE_SEARCH_TRAIN_BLAS_THREADS: trainingKnob(),
  /** Train the coarse quantizer in two levels (faster for large IVF counts). @tuning */
  IMAGE_SEARCH_TRAIN_TWO_LEVEL: z.preprocess((v) => (v === '' ? undefined : v), env.bool(false)),
  /** Index every image under IMAGE_FILE_DIR that is not indexed yet, in the background at start. */
  IMAGE_SEARCH_SCAN_ON_START: env.bool(false),
  /**
   * Who is asking (README, "Access"): the index's admin key, and/or the gateway's JWT signing secret
   * (tokens from the gateway's POST /login). Only admins change the index; neither: no changes over HTTP.
   */
  IMAGE_SEARCH_API_KEY: optional().refine((v) => v === undefined || v.length >= 16, 'must be at least 16 characters'),
  /** The gateway's signing secret: its login tokens are accepted (unset: only the admin key changes the index). */
  STRATA_JWT_SECRET: z.preprocess((v) => (typeof v === 'string' && v.trim() ? v.trim() : undefined), secretsEnv.STRATA_JWT_SECRET.optional()),
  /** Gateway users whose tokens may change the index (as the admin key may). */
  IMAGE_SEARCH_ADMIN_USERS: env.list(),
  /**
   * Sources anonymous callers may read (comma-separated): "directory" (the local image directory) and/or
   * bucket names. Other images are shown only to their bucket's owner and admins. Empty: nothing is public.
   */
  IMAGE_SEARCH_PUBLIC_SOURCES: env.list('directory'),
  /** An OpenAI-compatible upstream for the LLM features (unset: they are off). */
  LLM_BASE_URL: optional(),
  /** Its API key. */
  LLM_API_KEY: optional(),
  /** Unset: the first model the upstream's /v1/models lists. */
  LLM_MODEL: optional(),
  /** Seconds one LLM request may take: a search or chat waits for it, so keep it interactive. */
  LLM_TIMEOUT_SECONDS: env.int(10, 1, 600),
  /** Retries of a failed LLM request (each may take LLM_TIMEOUT_SECONDS again). */
  LLM_MAX_RETRIES: env.int(0, 0, 5),
});

export type ImageSearchConfig = Omit<z.infer<typeof imageSearchSchema>, 'IMAGE_FILE_DIR'> & { IMAGE_FILE_DIR: string };

export const DEFAULT_IMAGE_FILE_DIR = 'train2017/';

export function loadImageSearchConfig(source: NodeJS.ProcessEnv = process.env): ImageSearchConfig {
  const config = loadConfig('image-search', imageSearchSchema, source);
  const imageDir =
    config.IMAGE_FILE_DIR ?? (config.IMAGE_SEARCH_SOURCE_S3_URL ? path.join(config.IMAGE_SEARCH_INDEX_DIR, 'source-images') : DEFAULT_IMAGE_FILE_DIR);
  return { ...config, IMAGE_FILE_DIR: imageDir };
}
