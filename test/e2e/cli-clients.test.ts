import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { freshDirPerSuite } from '../support/temp-dir.js';
import { awsCli, rclone, s3cmd, type CliResult } from './support/cli.js';
import { platformHooks } from './support/platform.js';
import { bucketName, fileSha256 } from './support/s3.js';

function ok(r: CliResult): CliResult {
  expect(r.code, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`).to.equal(0);
  return r;
}

async function randomFile(file: string, bytes: number): Promise<void> {
  const out = createWriteStream(file);
  for (let left = bytes; left > 0; left -= 1 << 20) out.write(randomBytes(Math.min(left, 1 << 20)));
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
}

describe('e2e: real S3 command-line clients against the standalone platform', function () {
  this.timeout(240_000);
  const p = platformHooks();
  const work = freshDirPerSuite('strata-e2e-cli-');

  it('aws s3 (CLI v2): mb, cp 1 KiB and 40 MiB (multipart), ls, sync, presign, rm, rb — byte for byte', async () => {
    const aws = awsCli(p.endpoint, path.join(work.path, 'aws-home'));
    await mkdir(path.join(work.path, 'aws-home'), { recursive: true });
    const bucket = bucketName('aws');
    const small = path.join(work.path, 'small.bin');
    const big = path.join(work.path, 'big.bin');
    await randomFile(small, 1024);
    await randomFile(big, 40 * 1024 * 1024);

    ok(await aws('s3', 'mb', `s3://${bucket}`));
    ok(await aws('s3', 'cp', '--only-show-errors', small, `s3://${bucket}/files/small.bin`));
    ok(await aws('s3', 'cp', '--only-show-errors', big, `s3://${bucket}/files/big.bin`));

    const listing = ok(await aws('s3', 'ls', '--recursive', `s3://${bucket}`)).stdout;
    expect(listing).to.match(/\s1024 files\/small\.bin/);
    expect(listing).to.match(/\s41943040 files\/big\.bin/);
    // 40 MiB goes up in 8 MiB parts: the ETag is a multipart one.
    const head = JSON.parse(ok(await aws('s3api', 'head-object', '--bucket', bucket, '--key', 'files/big.bin')).stdout) as {
      ETag: string;
      ContentLength: number;
    };
    expect(head.ContentLength).to.equal(41943040);
    expect(head.ETag).to.match(/^"[0-9a-f]{32}-5"$/);

    const back = path.join(work.path, 'big.back');
    ok(await aws('s3', 'cp', '--only-show-errors', `s3://${bucket}/files/big.bin`, back));
    expect(await fileSha256(back)).to.equal(await fileSha256(big));
    const smallBack = path.join(work.path, 'small.back');
    ok(await aws('s3', 'cp', '--only-show-errors', `s3://${bucket}/files/small.bin`, smallBack));
    expect((await readFile(smallBack)).equals(await readFile(small))).to.equal(true);

    // Between buckets, above 8 MiB, the CLI copies server-side in parts (UploadPartCopy).
    const other = bucketName('aws-copy');
    ok(await aws('s3', 'mb', `s3://${other}`));
    ok(await aws('s3', 'cp', '--only-show-errors', `s3://${bucket}/files/big.bin`, `s3://${other}/big-copy.bin`));
    const copyHead = JSON.parse(ok(await aws('s3api', 'head-object', '--bucket', other, '--key', 'big-copy.bin')).stdout) as {
      ETag: string;
      ContentLength: number;
    };
    expect(copyHead.ContentLength).to.equal(41943040);
    const metrics = await (await fetch(`${p.endpoint}/metrics`)).text();
    expect(metrics).to.match(/http_requests_total\{[^}]*UploadPartCopy[^}]*\} [1-9]/);
    const copyBack = path.join(work.path, 'big.copy.back');
    ok(await aws('s3', 'cp', '--only-show-errors', `s3://${other}/big-copy.bin`, copyBack));
    expect(await fileSha256(copyBack)).to.equal(await fileSha256(big));
    ok(await aws('s3', 'rb', '--force', `s3://${other}`));

    // sync a directory up, change one file, sync again: only the change moves.
    const dir = path.join(work.path, 'sync');
    await mkdir(path.join(dir, 'sub'), { recursive: true });
    await writeFile(path.join(dir, 'a.txt'), 'alpha');
    await writeFile(path.join(dir, 'sub', 'b.txt'), 'beta');
    // A key with a space, '+', '&' and non-ASCII: the CLI lists with encoding-type=url and decodes.
    await writeFile(path.join(dir, 'odd name+1&é.txt'), 'odd');
    ok(await aws('s3', 'sync', '--only-show-errors', dir, `s3://${bucket}/sync`));
    await writeFile(path.join(dir, 'a.txt'), 'alpha, changed');
    const second = ok(await aws('s3', 'sync', '--no-progress', dir, `s3://${bucket}/sync`)).stdout;
    expect(second).to.contain('sync/a.txt');
    expect(second).not.to.contain('b.txt');
    expect(second, 'listed keys come back as they were stored').not.to.contain('odd name');
    expect(ok(await aws('s3', 'ls', `s3://${bucket}/sync/`)).stdout).to.contain(' odd name+1&é.txt');
    const down = path.join(work.path, 'sync-down');
    ok(await aws('s3', 'sync', '--only-show-errors', `s3://${bucket}/sync`, down));
    expect(await readFile(path.join(down, 'a.txt'), 'utf8')).to.equal('alpha, changed');
    expect(await readFile(path.join(down, 'sub', 'b.txt'), 'utf8')).to.equal('beta');
    expect(await readFile(path.join(down, 'odd name+1&é.txt'), 'utf8')).to.equal('odd');

    // A presigned URL works with a plain HTTP client.
    const url = ok(await aws('s3', 'presign', `s3://${bucket}/files/small.bin`, '--expires-in', '300')).stdout.trim();
    const fetched = await fetch(url);
    expect(fetched.status).to.equal(200);
    expect(Buffer.from(await fetched.arrayBuffer()).equals(await readFile(small))).to.equal(true);

    ok(await aws('s3', 'rm', '--only-show-errors', '--recursive', `s3://${bucket}`));
    expect(ok(await aws('s3', 'ls', '--recursive', `s3://${bucket}`)).stdout.trim()).to.equal('');
    ok(await aws('s3', 'rb', `s3://${bucket}`));
    expect(ok(await aws('s3', 'ls')).stdout).not.to.contain(bucket);
  });

  it('keys with leading, trailing and only spaces: aws s3api delete-objects, aws s3 sync --delete and rm --recursive, rclone delete leave nothing', async () => {
    const aws = awsCli(p.endpoint, path.join(work.path, 'aws-home'));
    await mkdir(path.join(work.path, 'aws-home'), { recursive: true });
    const bucket = bucketName('aws-spaces');
    const keys = ['sp ', ' lead', ' ', 'in the middle'];
    const dir = path.join(work.path, 'spaces');
    await mkdir(dir, { recursive: true });
    for (const k of keys) await writeFile(path.join(dir, k), `body of "${k}"`);
    const listed = async () =>
      ((JSON.parse(ok(await aws('s3api', 'list-objects-v2', '--bucket', bucket)).stdout || '{}') as { Contents?: Array<{ Key: string }> }).Contents ?? [])
        .map((o) => o.Key)
        .sort();
    ok(await aws('s3', 'mb', `s3://${bucket}`));
    // DeleteObjects as the CLI writes it: exactly the spaced keys go, the look-alikes stay.
    for (const k of [...keys, 'sp', 'lead'])
      ok(await aws('s3api', 'put-object', '--bucket', bucket, '--key', `batch/${k}`, '--body', path.join(dir, keys[0]!)));
    const deleted = JSON.parse(
      ok(await aws('s3api', 'delete-objects', '--bucket', bucket, '--delete', JSON.stringify({ Objects: keys.map((k) => ({ Key: `batch/${k}` })) }))).stdout,
    ) as { Deleted?: Array<{ Key: string }>; Errors?: unknown[] };
    expect(deleted.Errors ?? []).to.deep.equal([]);
    expect((deleted.Deleted ?? []).map((d) => d.Key).sort()).to.deep.equal(keys.map((k) => `batch/${k}`).sort());
    expect(await listed()).to.deep.equal(['batch/lead', 'batch/sp']);
    ok(await aws('s3', 'rm', '--only-show-errors', '--recursive', `s3://${bucket}/batch`));
    // sync up, remove one file locally, sync --delete: the remote copy goes.
    ok(await aws('s3', 'sync', '--only-show-errors', dir, `s3://${bucket}/sync`));
    expect(await listed()).to.deep.equal(keys.map((k) => `sync/${k}`).sort());
    await rm(path.join(dir, 'sp '));
    ok(await aws('s3', 'sync', '--only-show-errors', '--delete', dir, `s3://${bucket}/sync`));
    expect(await listed()).to.deep.equal(
      keys
        .filter((k) => k !== 'sp ')
        .map((k) => `sync/${k}`)
        .sort(),
    );
    ok(await aws('s3', 'rm', '--only-show-errors', '--recursive', `s3://${bucket}`));
    expect(await listed()).to.deep.equal([]);
    // rclone: copy up, then delete everything.
    const rc = rclone(p.endpoint, path.join(work.path, 'rclone-home'));
    ok(await rc('copy', dir, `strata:${bucket}/rc`));
    expect(await listed()).to.deep.equal(
      keys
        .filter((k) => k !== 'sp ')
        .map((k) => `rc/${k}`)
        .sort(),
    );
    ok(await rc('delete', `strata:${bucket}/rc`));
    expect(await listed()).to.deep.equal([]);
    ok(await aws('s3', 'rb', `s3://${bucket}`));
  });

  it('s3cmd: mb, put, ls, get, del, rb', async () => {
    const cmd = await s3cmd(p.endpoint, path.join(work.path, 's3cmd-home'));
    const bucket = bucketName('s3cmd');
    const file = path.join(work.path, 's3cmd.txt');
    await writeFile(file, 'written by s3cmd\n'.repeat(100));
    ok(await cmd('mb', `s3://${bucket}`));
    ok(await cmd('put', file, `s3://${bucket}/dir/s3cmd.txt`));
    const ls = ok(await cmd('ls', `s3://${bucket}/dir/`)).stdout;
    expect(ls).to.contain(`s3://${bucket}/dir/s3cmd.txt`);
    expect(ls).to.match(/\s1700\s/);
    const back = path.join(work.path, 's3cmd.back');
    ok(await cmd('get', `s3://${bucket}/dir/s3cmd.txt`, back));
    expect(await readFile(back, 'utf8')).to.equal(await readFile(file, 'utf8'));
    ok(await cmd('del', `s3://${bucket}/dir/s3cmd.txt`));
    expect(ok(await cmd('ls', '--recursive', `s3://${bucket}`)).stdout.trim()).to.equal('');
    ok(await cmd('rb', `s3://${bucket}`));
  });

  it('rclone: copy, ls, check', async () => {
    const rc = rclone(p.endpoint, path.join(work.path, 'rclone-home'));
    const bucket = bucketName('rclone');
    const src = path.join(work.path, 'rclone-src');
    await mkdir(path.join(src, 'nested'), { recursive: true });
    await writeFile(path.join(src, 'one.txt'), 'one');
    await writeFile(path.join(src, 'nested', 'two.bin'), randomBytes(300_000));
    ok(await rc('mkdir', `strata:${bucket}`));
    ok(await rc('copy', src, `strata:${bucket}/copied`));
    const ls = ok(await rc('ls', `strata:${bucket}`)).stdout;
    expect(ls).to.match(/\s3 copied\/one\.txt/);
    expect(ls).to.match(/\s300000 copied\/nested\/two\.bin/);
    const check = ok(await rc('check', src, `strata:${bucket}/copied`));
    expect(check.stderr).to.contain('0 differences found');
    expect(check.stderr).to.contain('2 matching files');
  });
});
