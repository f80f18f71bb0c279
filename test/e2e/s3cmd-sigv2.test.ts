import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { freshDirPerSuite } from '../support/temp-dir.js';
import { s3cmd, type CliResult } from './support/cli.js';
import { platformHooks } from './support/platform.js';
import { bucketName, fileSha256 } from './support/s3.js';

function ok(r: CliResult): CliResult {
  expect(r.code, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`).to.equal(0);
  return r;
}

/** s3cmd signing every request with AWS Signature Version 2 (`--signature-v2`), as older setups run it. */
describe('e2e: s3cmd --signature-v2 against the standalone platform', function () {
  this.timeout(240_000);
  const p = platformHooks();
  const work = freshDirPerSuite('strata-e2e-s3cmd-v2-');

  it('mb, put (plain and multipart), ls, info, get, signurl, del, rb', async () => {
    const client = await s3cmd(p.endpoint, path.join(work.path, 'home'));
    const cmd = (...args: string[]) => client('--signature-v2', ...args);
    const bucket = bucketName('s3cmd-v2');
    const small = path.join(work.path, 'small file.txt');
    const big = path.join(work.path, 'big.bin');
    await writeFile(small, 'signed with version 2\n'.repeat(50));
    await writeFile(big, randomBytes(6 * 1024 * 1024));

    // (--debug shows which signature s3cmd used, and that it never fell back to another.)
    const made = ok(await cmd('--debug', 'mb', `s3://${bucket}`));
    expect(made.stderr).to.contain('Using signature v2').and.not.contain('signature v4');
    ok(await cmd('put', small, `s3://${bucket}/dir/small file.txt`));
    // 6 MiB in 5 MiB parts: initiate (?uploads), parts (?partNumber&uploadId), complete (?uploadId) are all signed subresources.
    ok(await cmd('put', '--multipart-chunk-size-mb=5', big, `s3://${bucket}/big.bin`));
    const ls = ok(await cmd('ls', '--recursive', `s3://${bucket}`)).stdout;
    expect(ls).to.contain(`s3://${bucket}/dir/small file.txt`).and.contain(`s3://${bucket}/big.bin`);
    // info reads the bucket's location, policy, CORS, lifecycle...: each answered as S3 answers an unset one.
    expect(ok(await cmd('info', `s3://${bucket}`)).stdout).to.match(/Location:\s+us-east-1/);

    const back = path.join(work.path, 'big.back');
    ok(await cmd('get', `s3://${bucket}/big.bin`, back));
    expect(await fileSha256(back)).to.equal(await fileSha256(big));

    // signurl: a presigned SigV2 URL (AWSAccessKeyId, Expires, Signature) any HTTP client can use.
    const url = ok(await cmd('signurl', `s3://${bucket}/dir/small file.txt`, '+300')).stdout.trim();
    expect(url).to.match(/[?&]AWSAccessKeyId=.*&Expires=\d+&Signature=/);
    const got = await fetch(url);
    expect([got.status, await got.text()]).to.deep.equal([200, await readFile(small, 'utf8')]);

    ok(await cmd('del', '--recursive', '--force', `s3://${bucket}`));
    expect(ok(await cmd('ls', '--recursive', `s3://${bucket}`)).stdout.trim()).to.equal('');
    ok(await cmd('rb', `s3://${bucket}`));
  });
});
