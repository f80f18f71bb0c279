import type http from 'node:http';
import busboy from 'busboy';
import { pipeline, type Readable } from 'node:stream';
import { assertObjectKey, mergeStoredHeaders, S3Error, standardHeadersOf } from '../../../object-model/src/index.js';
import { identity } from '../auth/authenticate.js';
import { enforceKeyScope } from '../auth/key-scope.js';
import { verifyPostPolicy } from '../auth/post-policy.js';
import { state } from '../context.js';
import { aclContext, objectAclHeaders, writerOf } from '../middleware/access-policy.js';
import type { S3Handler, S3Request } from '../s3/operation.js';
import { quoted, sendXml, urlEncodeKey, sendStatus } from '../s3/render.js';
import { checkFormEncryption, setSseHeaders, sseRequestOfForm } from '../s3/encryption.js';
import { invalidBeforeUnsupported, refuseUnsupportedObjectProperties } from '../s3/object-properties.js';
import { userMetadataOf } from '../s3/request.js';
import { parseTagging, type TaggingXml } from '../s3/tagging-xml.js';
import { parseXml } from '../s3/xml.js';
import { SizeRangeCheck, VerifiedBody, type BodyCheck } from '../s3/verified-body.js';
import { originOf } from './presign.js';

/** Most bytes of the fields before the file (S3 allows 20 KB). */
const MAX_FIELDS_BYTES = 20 * 1024;

interface Form {
  /** The fields before the file, by lower-cased name (S3 ignores those after it). */
  fields: Map<string, string>;
  file: Readable;
  filename: string;
  /** Stop parsing and let the rest of the body flow away (so the client reads our answer, not a reset). */
  drain(): void;
  /** Resolves once the form ended with its closing delimiter (`--boundary--`); MalformedPOSTRequest otherwise. */
  ended: Promise<void>;
}

const cutForm = () => new S3Error('MalformedPOSTRequest', 'The form ends before its closing boundary.');

/** The upload completes only once its form ended whole: a form cut after the file's bytes stores nothing. */
class FormEndCheck implements BodyCheck {
  constructor(private readonly ended: Promise<void>) {}

  update(): void {}

  finish(): Promise<void> {
    return this.ended;
  }
}

/** Read a multipart/form-data body up to its `file` field, whose bytes are then left to stream. */
function formUntilFile(req: http.IncomingMessage): Promise<Form> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: { fieldSize: MAX_FIELDS_BYTES, fields: 100, files: 101, parts: 101 } });
    } catch {
      reject(new S3Error('MalformedPOSTRequest'));
      return;
    }
    const fields = new Map<string, string>();
    let fieldBytes = 0;
    let failed = false;
    let parseError = false;
    const ended = new Promise<void>((resolveEnd, rejectEnd) => {
      parser.once('error', () => rejectEnd(cutForm()));
      parser.once('close', () => (parseError ? rejectEnd(cutForm()) : resolveEnd()));
    });
    ended.catch(() => undefined);
    // Refused before the file: stop parsing and let the rest of the body flow away.
    const fail = (err: S3Error) => {
      failed = true;
      req.unpipe(parser);
      req.resume();
      reject(err);
    };
    parser.on('field', (name, value, info) => {
      fieldBytes += name.length + value.length;
      if (info.valueTruncated || fieldBytes > MAX_FIELDS_BYTES) fail(new S3Error('MaxPostPreDataLengthExceededError'));
      fields.set(name.toLowerCase(), value);
    });
    // A part other than `file` that comes with a filename (as some clients send every field) is a field all
    // the same, as S3 takes it: read whole before the file is handed on, so the policy sees it.
    const fileFields: Promise<void>[] = [];
    let fileSeen = false;
    parser.on('file', (name, stream, info) => {
      if (failed || fileSeen) {
        stream.resume();
        return;
      }
      if (name.toLowerCase() !== 'file') {
        const parts: Buffer[] = [];
        fileFields.push(
          new Promise<void>((done) => {
            stream.on('data', (chunk: Buffer) => {
              fieldBytes += chunk.length;
              if (fieldBytes > MAX_FIELDS_BYTES) fail(new S3Error('MaxPostPreDataLengthExceededError'));
              else parts.push(chunk);
            });
            stream.on('error', () => done());
            stream.on('end', () => {
              fieldBytes += name.length;
              fields.set(name.toLowerCase(), Buffer.concat(parts).toString('utf8'));
              done();
            });
          }),
        );
        return;
      }
      fileSeen = true;
      // A form that ends before the file's closing boundary errors the file, maybe before the handler pipes
      // it anywhere (the policy is checked first): the error stays on the stream (`errored`) for it to see.
      stream.on('error', () => undefined);
      const form = {
        fields,
        file: stream,
        filename: info.filename ?? '',
        ended,
        drain: () => {
          req.unpipe(parser);
          stream.resume();
          req.resume();
        },
      };
      void Promise.all(fileFields).then(() => resolve(form));
    });
    // Once the file was found the form resolves (after the fields sent as files), never this.
    parser.on('close', () => {
      if (!fileSeen) reject(new S3Error('InvalidArgument', 'POST requires exactly one file upload per request.', { ArgumentName: 'file' }));
    });
    parser.on('error', () => {
      parseError = true;
      fail(new S3Error('MalformedPOSTRequest'));
    });
    req.pipe(parser);
  });
}

/** The fields that make a form a signed one (SigV4 or SigV2): with any of them, its policy must hold. */
const SIGNED_FORM_FIELDS = ['policy', 'x-amz-credential', 'x-amz-signature', 'x-amz-algorithm', 'awsaccesskeyid', 'signature'];

/** The user whose signed policy authenticates the form, and the size range it allows. */
async function signedBy(fields: ReadonlyMap<string, string>, { res, bucket, deps }: S3Request) {
  const { credential, sizeRange } = await verifyPostPolicy(fields, bucket, deps.credentials, deps.region, { signatureV2: deps.signatureV2 });
  const caller = { ...identity(credential, deps.rootUser), via: 'post-policy' as const };
  state(res).caller = caller;
  // A scoped key writes nothing (it was not known before the form named it).
  enforceKeyScope(caller, 'PostObject', bucket, '', null);
  // Flow control saw no user (the policy names it): the user's rate limit counts the upload now.
  await deps.admitUser?.(res, caller.username);
  return { caller, sizeRange };
}

/**
 * POST /{bucket} with a multipart/form-data body: a browser form upload (S3 "POST Object"). The form's
 * signed policy authenticates it (auth/post-policy.ts), or, with no policy and no credential, it is
 * anonymous (a bucket granting AllUsers WRITE takes it); the file streams to the data plane as a PUT
 * would, held back at its end until its size is within the policy's content-length-range.
 */
export const postObject: S3Handler = async (s3) => {
  const { req, res, bucket, deps } = s3;
  const form = await formUntilFile(req);
  // `${filename}` in the key is the file's name before anything reads the key: the policy's conditions hold
  // for the key the upload gets (as radosgw and MinIO check them), not for the placeholder.
  const keyField = form.fields.get('key');
  if (keyField !== undefined) form.fields.set('key', keyField.replaceAll('${filename}', form.filename));
  try {
    // A form with neither a policy nor a credential is anonymous (S3: the policy is required unless the
    // bucket is publicly writable); flow control already counted it against the anonymous rate of its address.
    const anonymous = !SIGNED_FORM_FIELDS.some((name) => form.fields.has(name));
    const { caller, sizeRange } = anonymous ? { caller: undefined, sizeRange: undefined } : await signedBy(form.fields, s3);
    const bucketInfo = await deps.buckets.permitted(bucket, caller, 'WRITE');
    const writer = writerOf(bucketInfo, caller?.username);
    const field = (name: string): string | undefined => form.fields.get(name);
    invalidBeforeUnsupported(
      () => checkFormEncryption(form.fields),
      () => refuseUnsupportedObjectProperties(field, form.fields.get('acl')),
    );
    const key = form.fields.get('key');
    if (key === undefined) throw new S3Error('InvalidArgument', "Bucket POST must contain a field named 'key'.", { ArgumentName: 'key' });
    assertObjectKey(key);
    // The form's `tagging` field is a Tagging document (S3's POST Object), not a header's k=v list.
    const taggingField = form.fields.get('tagging');
    const tags = taggingField === undefined ? undefined : parseTagging(parseXml<TaggingXml>(taggingField, 'Tagging'), 'object');
    // The file's last bytes are held back until the form ended with its closing boundary (and the size is
    // within the policy's range): a form cut short is MalformedPOSTRequest and completes no upload.
    if (form.file.errored) throw cutForm();
    const body = new VerifiedBody([...(sizeRange ? [new SizeRangeCheck(sizeRange.min, sizeRange.max)] : []), new FormEndCheck(form.ended)]);
    form.file.once('error', () => body.destroy(cutForm()));
    pipeline(form.file, body, () => undefined);
    const result = await deps.objects.putObject(
      bucket,
      key,
      {
        contentType: form.fields.get('content-type') ?? 'binary/octet-stream',
        owner: writer,
        anonymous: !caller,
        userMetadata: userMetadataOf(form.fields),
        tags,
        headers: mergeStoredHeaders(
          standardHeadersOf(form.fields),
          await objectAclHeaders(field, bucketInfo, writer, aclContext(deps), form.fields.get('acl')),
        ),
        // The form's x-amz-server-side-encryption* fields, as a PUT's headers (SSE-S3, SSE-KMS, SSE-C).
        sse: sseRequestOfForm(form.fields),
        bucketRecord: bucketInfo,
      },
      body,
      state(res).clientGone,
    );
    const etag = quoted(result.object.etag);
    res.setHeader('ETag', etag);
    setSseHeaders(res, result.object.sse);
    const location = `${originOf(s3)}/${urlEncodeKey(bucket)}/${urlEncodeKey(key)}`;
    res.setHeader('Location', location);
    const redirect = redirectTarget(form.fields.get('success_action_redirect') ?? form.fields.get('redirect'));
    if (redirect) {
      redirect.searchParams.set('bucket', bucket);
      redirect.searchParams.set('key', key);
      redirect.searchParams.set('etag', etag);
      res.setHeader('Location', redirect.toString());
      sendStatus(res, 303);
      return;
    }
    const status = form.fields.get('success_action_status');
    // S3's PostResponse has no XML namespace (browser code reads its elements by plain name).
    if (status === '201') sendXml(res, 'PostResponse', { Location: location, Bucket: bucket, Key: key, ETag: etag }, 201, false);
    else sendStatus(res, status === '200' ? 200 : 204);
  } catch (err) {
    form.drain();
    throw err;
  }
};

/** An absolute http(s) URL to send the browser on to, or undefined (then the status applies). */
function redirectTarget(value: string | undefined): URL | undefined {
  if (!value) return undefined;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}
