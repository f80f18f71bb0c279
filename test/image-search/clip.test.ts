import { expect } from 'chai';
import { createRequire } from 'node:module';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { SignatureV4 } from '@smithy/signature-v4';
import { createHash, createHmac } from 'node:crypto';
import { ClipEncoder } from '../../images/image-search/src/clip/encoder.js';
import {
  checkModelDir,
  describeModel,
  fetchModelFromS3,
  MODEL_FILES,
  ModelMissingError,
  signedHeaders,
} from '../../images/image-search/src/clip/model-files.js';
import { CLIP_MEAN, CLIP_STD, ImageDecodeError, preprocessImage } from '../../images/image-search/src/clip/preprocess.js';
import { ClipTokenizer, bytesToUnicode, parseMerges, CONTEXT_LENGTH } from '../../images/image-search/src/clip/tokenizer.js';
import { buildVocabulary } from '../../hack/clip/test-clip-model.js';
import { colourImage, makeTestModel, tempDir } from './support/fixtures.js';

const dot = (a: Float32Array, i: number, b: Float32Array, j: number, d = 512) => {
  let s = 0;
  for (let k = 0; k < d; k++) s += a[i * d + k] * b[j * d + k];
  return s;
};

describe('image-search: CLIP tokenizer', () => {
  it('maps the 256 byte values to 256 distinct printable characters, as CLIP does', () => {
    const table = bytesToUnicode();
    expect(new Set(table).size).to.equal(256);
    expect(table['a'.charCodeAt(0)]).to.equal('a');
    expect(table[32]).to.equal('Ġ'); // CLIP/GPT-2 map space to U+0120
  });

  it('applies merges by rank and marks word ends', () => {
    const { merges, vocab } = buildVocabulary(['red', 'green']);
    const tokenizer = new ClipTokenizer(merges, vocab);
    expect(tokenizer.pieces('Red  GREEN')).to.deep.equal(['red</w>', 'green</w>']);
    expect(tokenizer.pieces('reed')).to.not.deep.equal(['reed</w>']);
    expect(tokenizer.pieces("it's 42!")).to.deep.equal(['i', 't</w>', "'", 's</w>', '4</w>', '2</w>', '!</w>']);
    // A handmade merge table: lower rank wins.
    const manual = new ClipTokenizer(
      parseMerges('#version: 0.2\na b</w>\na b\n'),
      new Map([
        ['a', 0],
        ['b</w>', 1],
        ['ab</w>', 2],
        ['ab', 3],
        ['<|startoftext|>', 4],
        ['<|endoftext|>', 5],
      ]),
    );
    expect(manual.bpe('ab')).to.deep.equal(['ab</w>']);
  });

  it('tokenizes to the 77-token context with SOT/EOT, zero padding and truncation', () => {
    const { merges, vocab } = buildVocabulary(['red']);
    const tokenizer = new ClipTokenizer(merges, vocab);
    const ids = tokenizer.tokenize(['red', 'red '.repeat(200)]);
    expect(ids.length).to.equal(2 * CONTEXT_LENGTH);
    expect(Number(ids[0])).to.equal(tokenizer.sot);
    expect(Number(ids[1])).to.equal(vocab.get('red</w>'));
    expect(Number(ids[2])).to.equal(tokenizer.eot);
    expect(Array.from(ids.slice(3, CONTEXT_LENGTH), Number).every((v) => v === 0)).to.equal(true);
    expect(Number(ids[CONTEXT_LENGTH])).to.equal(tokenizer.sot);
    expect(Number(ids[2 * CONTEXT_LENGTH - 1])).to.equal(tokenizer.eot);
  });

  it('derives CLIP-style ids from merges.txt alone (no vocab.json)', () => {
    const dir = tempDir('bpe');
    try {
      const { merges } = buildVocabulary(['blue']);
      writeFileSync(path.join(dir, 'merges.txt'), '#version: 0.2\n' + merges.map((m) => m.join(' ')).join('\n'));
      const tokenizer = ClipTokenizer.fromDirectory(dir);
      expect(tokenizer.vocabularySize).to.equal(512 + merges.length + 2);
      expect(tokenizer.sot).to.equal(512 + merges.length);
      expect(tokenizer.encode('blue')).to.deep.equal([512 + merges.length - 1]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('image-search: CLIP preprocessing and encoders', function () {
  this.timeout(60_000);
  let modelDir: string;
  let encoder: ClipEncoder;
  before(async () => {
    modelDir = makeTestModel();
    encoder = await ClipEncoder.load(modelDir);
  });
  after(async () => {
    await encoder.close();
    rmSync(modelDir, { recursive: true, force: true });
  });

  it('resizes the shortest side to 224, centre-crops and normalises with CLIP mean/std', async () => {
    // 448x224: left quarter black, then red, then blue, right quarter black; the crop keeps red|blue.
    const width = 448;
    const raw = Buffer.alloc(width * 224 * 3);
    for (let y = 0; y < 224; y++) {
      for (let x = 0; x < width; x++) {
        const rgb = x < 112 || x >= 336 ? [0, 0, 0] : x < 224 ? [255, 0, 0] : [0, 0, 255];
        raw.set(rgb, (y * width + x) * 3);
      }
    }
    const png = await sharp(raw, { raw: { width, height: 224, channels: 3 } })
      .png()
      .toBuffer();
    const out = new Float32Array(3 * 224 * 224);
    await preprocessImage(png, out);
    const at = (c: number, y: number, x: number) => out[c * 224 * 224 + y * 224 + x];
    expect(at(0, 100, 10)).to.be.closeTo((1 - CLIP_MEAN[0]) / CLIP_STD[0], 1e-4);
    expect(at(2, 100, 10)).to.be.closeTo((0 - CLIP_MEAN[2]) / CLIP_STD[2], 1e-4);
    expect(at(2, 100, 213)).to.be.closeTo((1 - CLIP_MEAN[2]) / CLIP_STD[2], 1e-4);
    expect(at(0, 100, 213)).to.be.closeTo((0 - CLIP_MEAN[0]) / CLIP_STD[0], 1e-4);
  });

  it('rejects bytes that are not an image', async () => {
    let error: unknown;
    await preprocessImage(Buffer.from('definitely not a picture'), new Float32Array(3 * 224 * 224)).catch((e) => (error = e));
    expect(error).to.be.instanceOf(ImageDecodeError);
  });

  it('gives unit vectors; similar images and matching colour words are close', async () => {
    const images = await Promise.all([colourImage([215, 35, 35], 1), colourImage([200, 45, 40], 2), colourImage([35, 65, 215], 3)]);
    const jpeg = await sharp(images[0]).jpeg().toBuffer();
    const webp = await sharp(images[2]).webp().toBuffer();
    const v = await encoder.encodeImages([...images, jpeg, webp]);
    expect(v.length).to.equal(5 * 512);
    for (let i = 0; i < 5; i++) expect(dot(v, i, v, i)).to.be.closeTo(1, 1e-4);
    expect(dot(v, 0, v, 1)).to.be.greaterThan(dot(v, 0, v, 2) + 0.5);
    expect(dot(v, 0, v, 3)).to.be.greaterThan(0.99);
    expect(dot(v, 2, v, 4)).to.be.greaterThan(0.99);
    const t = await encoder.encodeTexts(['red', 'a blue thing']);
    expect(dot(t, 0, t, 0)).to.be.closeTo(1, 1e-4);
    expect(dot(t, 0, v, 0)).to.be.greaterThan(dot(t, 0, v, 2));
    expect(dot(t, 1, v, 2)).to.be.greaterThan(dot(t, 1, v, 0));
  });
});

describe('image-search: model files', function () {
  this.timeout(60_000);

  it('names what is missing', () => {
    expect(() => checkModelDir(undefined)).to.throw(ModelMissingError, /IMAGE_SEARCH_MODEL_DIR/);
    const dir = tempDir('empty-model');
    try {
      expect(() => checkModelDir(dir)).to.throw(ModelMissingError, /image_encoder.onnx, text_encoder.onnx, merges.txt/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('tells the test encoder from CLIP by its merges.txt', () => {
    const test = makeTestModel();
    const clip = tempDir('clip-like');
    try {
      writeFileSync(path.join(clip, 'merges.txt'), '#version: 0.2\ni n\n');
      expect(describeModel(test)).to.deep.include({ backbone: 'strata-test-clip', testEncoder: true });
      expect(describeModel(clip)).to.deep.equal({ backbone: 'ViT-B/32', testEncoder: false });
    } finally {
      rmSync(test, { recursive: true, force: true });
      rmSync(clip, { recursive: true, force: true });
    }
  });

  it('signs GETs with AWS Signature V4 exactly as the AWS SDK signer does', async () => {
    class Sha256 {
      private readonly hash;
      constructor(secret?: string | Uint8Array) {
        this.hash = secret ? createHmac('sha256', secret) : createHash('sha256');
      }
      update(data: string | Uint8Array) {
        this.hash.update(data);
      }
      async digest() {
        return new Uint8Array(this.hash.digest());
      }
    }
    const date = new Date('2026-01-02T03:04:05Z');
    const url = new URL('http://127.0.0.1:9000/models/clip/test/image_encoder.onnx');
    const credentials = { accessKeyId: 'AKEXAMPLE', secretAccessKey: 'secret/EXAMPLE' };
    const mine = signedHeaders(url, { ...credentials, region: 'eu-west-1' }, date);
    const signer = new SignatureV4({
      credentials,
      region: 'eu-west-1',
      service: 's3',
      sha256: Sha256 as unknown as ConstructorParameters<typeof SignatureV4>[0]['sha256'],
      uriEscapePath: false,
      applyChecksum: false,
    });
    const reference = await signer.sign(
      {
        method: 'GET',
        protocol: 'http:',
        hostname: '127.0.0.1',
        port: 9000,
        path: url.pathname,
        query: {},
        headers: { host: url.host, 'x-amz-content-sha256': mine['x-amz-content-sha256'] },
      },
      { signingDate: date },
    );
    expect(mine.authorization).to.equal(reference.headers.authorization);
    expect(signedHeaders(url, {})).to.deep.equal({});
    // A listing: the query string is part of what is signed.
    const list = new URL('http://127.0.0.1:9000/images?prefix=photos%2Fcats%20%26%20dogs%2F&list-type=2&continuation-token=a%2Bb%3D');
    const listed = signedHeaders(list, { ...credentials, region: 'eu-west-1' }, date);
    const listReference = await signer.sign(
      {
        method: 'GET',
        protocol: 'http:',
        hostname: '127.0.0.1',
        port: 9000,
        path: list.pathname,
        query: Object.fromEntries(list.searchParams),
        headers: { host: list.host, 'x-amz-content-sha256': listed['x-amz-content-sha256'] },
      },
      { signingDate: date },
    );
    expect(listed.authorization).to.equal(listReference.headers.authorization);
  });

  it('fetches the model from an S3 bucket with SigV4-signed GETs (s3rver)', async () => {
    const require = createRequire(import.meta.url);
    type S3rverServer = { run(): Promise<{ port: number }>; close(): Promise<void> };
    const S3rver = require('s3rver') as new (options: Record<string, unknown>) => S3rverServer;
    const storage = tempDir('s3rver');
    const modelDir = makeTestModel();
    const cache = path.join(tempDir('model-cache'), 'clip');
    const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: storage, configureBuckets: [{ name: 'models' }] });
    const { port } = await server.run();
    const endpoint = `http://127.0.0.1:${port}`;
    try {
      for (const name of Object.values(MODEL_FILES)) {
        const put = await fetch(`${endpoint}/models/clip/test/${name}`, { method: 'PUT', body: readFileSync(path.join(modelDir, name)) });
        expect(put.status).to.equal(200);
      }
      const location = { endpoint, url: 's3://models/clip/test', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
      const dir = await fetchModelFromS3(location, cache);
      expect(readFileSync(path.join(dir, MODEL_FILES.image)).equals(readFileSync(path.join(modelDir, MODEL_FILES.image)))).to.equal(true);
      const encoder = await ClipEncoder.load(dir);
      expect(encoder.dim).to.equal(512);
      await encoder.close();
      // Requests carry the credentials: an unknown access key is refused (s3rver checks keys, not V4 signatures).
      let error: unknown;
      await fetchModelFromS3({ ...location, accessKeyId: 'NOBODY' }, path.join(cache, 'other')).catch((e) => (error = e));
      expect(error).to.be.instanceOf(ModelMissingError);
      expect(String(error)).to.match(/403/);
      await fetchModelFromS3({ ...location, url: 's3://models/nothing-here' }, path.join(cache, 'none')).catch((e) => (error = e));
      expect(String(error)).to.match(/404/);
    } finally {
      await server.close();
      for (const d of [storage, modelDir, path.dirname(cache)]) rmSync(d, { recursive: true, force: true });
    }
  });
});
