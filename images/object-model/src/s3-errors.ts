/**
 * The one enumeration of S3 error codes, shared by every object-storage service. The gateway renders
 * them as S3 XML; internal services return them as JSON `{"error":{"code","message"}}` with the same
 * status, so the code survives the hop unchanged.
 */
/**
 * Why an fs bucket is refused where the data planes share no volume (STRATA_FS_BACKEND=false: the
 * operator's replicated data planes, hack/adr/0007-replicated-planes.md).
 */
export const FS_BACKEND_OFF =
  'This object store keeps no bytes on the fs backend (its data planes share no volume, STRATA_FS_BACKEND=false): use the minio or cloud backend (x-strata-backend).';

export const S3_ERRORS = {
  AccessDenied: { status: 403, message: 'Access Denied' },
  AccessControlListNotSupported: { status: 400, message: 'The bucket does not allow ACLs' },
  AccessForbidden: {
    status: 403,
    message:
      'CORSResponse: This CORS request is not allowed. This is usually because the evaluation of Origin, request method / ' +
      "Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
  },
  AuthorizationHeaderMalformed: { status: 400, message: 'The authorization header you provided is invalid.' },
  AuthorizationQueryParametersError: { status: 400, message: 'Error parsing the query-string authentication parameters.' },
  BadRequest: { status: 400, message: 'Bad Request' },
  BadDigest: { status: 400, message: 'The Content-MD5 you specified did not match what we received.' },
  BucketAlreadyExists: { status: 409, message: 'The requested bucket name is not available.' },
  BucketAlreadyOwnedByYou: { status: 409, message: 'Your previous request to create the named bucket succeeded and you already own it.' },
  BucketNotEmpty: { status: 409, message: 'The bucket you tried to delete is not empty.' },
  EntityTooLarge: { status: 400, message: 'Your proposed upload exceeds the maximum allowed object size.' },
  EntityTooSmall: { status: 400, message: 'Your proposed upload is smaller than the minimum allowed object size.' },
  ExpiredToken: { status: 400, message: 'The provided token has expired.' },
  IllegalLocationConstraintException: {
    status: 400,
    message: 'The location constraint is incompatible for the region specific endpoint this request was sent to.',
  },
  IncompleteBody: { status: 400, message: 'You did not provide the number of bytes specified by the Content-Length HTTP header.' },
  InsufficientStorage: { status: 507, message: 'The storage volume is full; free space or raise the quota, then retry.' },
  InternalError: { status: 500, message: 'We encountered an internal error. Please try again.' },
  InvalidAccessKeyId: { status: 403, message: 'The AWS Access Key Id you provided does not exist in our records.' },
  InvalidArgument: { status: 400, message: 'Invalid Argument' },
  InvalidBucketAclWithObjectOwnership: { status: 400, message: "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting" },
  InvalidBucketName: { status: 400, message: 'The specified bucket is not valid.' },
  InvalidLocationConstraint: { status: 400, message: 'The specified location-constraint is not valid' },
  InvalidDigest: { status: 400, message: 'The Content-MD5 you specified is not valid.' },
  InvalidObjectName: { status: 400, message: 'The specified object name is not valid.' },
  InvalidPart: {
    status: 400,
    message:
      'One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have ' +
      "matched the part's entity tag.",
  },
  InvalidPartNumber: { status: 416, message: 'The requested partnumber is not satisfiable' },
  InvalidPartOrder: { status: 400, message: 'The list of parts was not in ascending order. Parts must be ordered by part number.' },
  InvalidRange: { status: 416, message: 'The requested range is not satisfiable' },
  InvalidPolicyDocument: { status: 400, message: 'The content of the form does not meet the conditions specified in the policy document.' },
  InvalidRedirectLocation: { status: 400, message: "The website redirect location must have a prefix of 'http://' or 'https://' or '/'." },
  InvalidRequest: { status: 400, message: 'Invalid Request' },
  InvalidStorageClass: { status: 400, message: 'The storage class you specified is not valid.' },
  InvalidTag: { status: 400, message: 'The tag provided was not a valid tag.' },
  InvalidTargetBucketForLogging: { status: 400, message: 'The target bucket for logging does not exist or is not owned by you.' },
  InvalidToken: { status: 400, message: 'The provided token is malformed or otherwise invalid.' },
  InvalidURI: { status: 400, message: "Couldn't parse the specified URI." },
  KeyTooLongError: { status: 400, message: 'Your key is too long.' },
  MalformedACLError: { status: 400, message: 'The XML you provided was not well-formed or did not validate against our published schema.' },
  MalformedPOSTRequest: { status: 400, message: 'The body of your POST request is not well-formed multipart/form-data.' },
  MalformedTrailerError: { status: 400, message: 'The request contained trailing data that was not well-formed or did not conform to our published schema.' },
  MalformedXML: { status: 400, message: 'The XML you provided was not well-formed or did not validate against our published schema.' },
  MaxPostPreDataLengthExceededError: { status: 400, message: 'Your POST request fields preceding the upload file were too large.' },
  MaxMessageLengthExceeded: { status: 400, message: 'Your request was too big.' },
  MetadataTooLarge: { status: 400, message: 'Your metadata headers exceed the maximum allowed metadata size.' },
  MethodNotAllowed: { status: 405, message: 'The specified method is not allowed against this resource.' },
  MissingContentLength: { status: 411, message: 'You must provide the Content-Length HTTP header.' },
  MissingSecurityHeader: { status: 400, message: 'Your request is missing a required header.' },
  NoSuchBucket: { status: 404, message: 'The specified bucket does not exist.' },
  NoSuchBucketPolicy: { status: 404, message: 'The bucket policy does not exist.' },
  NoSuchCORSConfiguration: { status: 404, message: 'The CORS configuration does not exist.' },
  NoSuchJob: { status: 404, message: 'The specified job does not exist; a job lives with its control plane replica, a day once finished.' },
  NoSuchKey: { status: 404, message: 'The specified key does not exist.' },
  NoSuchLifecycleConfiguration: { status: 404, message: 'The lifecycle configuration does not exist.' },
  NoSuchPublicAccessBlockConfiguration: { status: 404, message: 'The public access block configuration was not found.' },
  NoSuchTagSet: { status: 404, message: 'The TagSet does not exist.' },
  NoSuchWebsiteConfiguration: { status: 404, message: 'The specified bucket does not have a website configuration.' },
  NoSuchUpload: {
    status: 404,
    message: 'The specified multipart upload does not exist. The upload ID might be invalid, or the multipart upload might have been aborted or completed.',
  },
  'KMS.NotFoundException': { status: 400, message: 'Invalid keyId' },
  NotImplemented: { status: 501, message: 'A header you provided implies functionality that is not implemented.' },
  ObjectLockConfigurationNotFoundError: { status: 404, message: 'Object Lock configuration does not exist for this bucket.' },
  OperationAborted: { status: 409, message: 'A conflicting conditional operation is currently in progress against this resource. Please try again.' },
  OwnershipControlsNotFoundError: { status: 404, message: 'The bucket ownership controls were not found.' },
  PreconditionFailed: { status: 412, message: 'At least one of the preconditions you specified did not hold.' },
  ReplicationConfigurationNotFoundError: { status: 404, message: 'The replication configuration was not found.' },
  RequestTimeout: {
    status: 400,
    message: 'Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.',
  },
  RequestTimeTooSkewed: { status: 403, message: "The difference between the request time and the server's time is too large." },
  ServerSideEncryptionConfigurationNotFoundError: { status: 404, message: 'The server side encryption configuration was not found.' },
  ServiceUnavailable: { status: 503, message: 'Please reduce your request rate.' },
  SignatureDoesNotMatch: {
    status: 403,
    message: 'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
  },
  SlowDown: { status: 503, message: 'Please reduce your request rate.' },
  UnexpectedContent: { status: 400, message: 'This request does not support content' },
  Unauthorized: { status: 401, message: 'Authentication required.' },
  UnresolvableGrantByEmailAddress: { status: 400, message: 'The e-mail address you provided does not match any account on record.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type S3ErrorCode = keyof typeof S3_ERRORS;

/** An S3 error with its code, HTTP status and optional extra fields for the XML body (e.g. Key, UploadId). */
export class S3Error extends Error {
  readonly status: number;
  constructor(
    readonly code: S3ErrorCode,
    message?: string,
    readonly extra: Record<string, string> = {},
  ) {
    super(message ?? S3_ERRORS[code].message);
    this.name = 'S3Error';
    this.status = S3_ERRORS[code].status;
  }

  toJSON(): { error: { code: S3ErrorCode; message: string; extra?: Record<string, string> } } {
    return { error: { code: this.code, message: this.message, ...(Object.keys(this.extra).length ? { extra: this.extra } : {}) } };
  }

  /**
   * Rebuild from an internal service's JSON error body and its status; unknown codes become InternalError.
   * A 409 InvalidArgument (a taken name or address, ConflictError) keeps its 409.
   */
  static fromJSON(body: unknown, status?: number): S3Error {
    const e = (body as { error?: { code?: string; message?: string; extra?: Record<string, string> } } | null)?.error;
    if (status === 409 && e?.code === 'InvalidArgument') return new ConflictError(e.message ?? 'conflict');
    if (e?.code && e.code in S3_ERRORS) return new S3Error(e.code as S3ErrorCode, e.message, e.extra ?? {});
    return new S3Error('InternalError', e?.message);
  }
}

/** "409 InvalidArgument": what the admin API answers for a name, key or address another user or key has. */
export class ConflictError extends S3Error {
  override readonly status = 409;
  constructor(message: string) {
    super('InvalidArgument', message);
  }
}

export function isS3ErrorCode(code: string): code is S3ErrorCode {
  return Object.prototype.hasOwnProperty.call(S3_ERRORS, code);
}
