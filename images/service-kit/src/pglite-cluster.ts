import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { cp, mkdtemp, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

/**
 * New PGlite clusters without running initdb each time. initdb takes seconds (and, run in a process's
 * own WASM memory, leaves it ~500 MB large for good), so it runs once per process and options, in a
 * short-lived child process, into a temporary folder removed at exit; every new cluster is a copy of
 * that pristine one: on disk a copy of its files, in memory a load of its tarball. Both are what initdb
 * would have made with the same options.
 */
const pristineFolders = new Map<string, Promise<string>>();
const pristineTarballs = new Map<string, Promise<string>>();

/**
 * Make a cluster in `dataDir` (absent, or an empty folder) as initdb would. The copy is made beside it
 * and renamed into place, so a copy cut short (a crash, a full disk) never leaves a half cluster that
 * the next start would take for a whole one.
 */
export async function createPgliteCluster(dataDir: string, postgresqlconf: string[]): Promise<void> {
  const pristineDir = await pristine(pristineFolders, 'folder', postgresqlconf);
  const copy = `${path.resolve(dataDir)}.new-${process.pid}`;
  await rm(copy, { recursive: true, force: true });
  try {
    await cp(pristineDir, copy, { recursive: true });
    await rename(copy, dataDir);
  } finally {
    await rm(copy, { recursive: true, force: true });
  }
}

/** The path of a tarball of a fresh cluster, for PGlite's `loadDataDir` (an in-memory database). */
export function pristineClusterTarball(postgresqlconf: string[]): Promise<string> {
  return pristine(pristineTarballs, 'tarball', postgresqlconf);
}

function pristine(made: Map<string, Promise<string>>, form: 'folder' | 'tarball', postgresqlconf: string[]): Promise<string> {
  const key = JSON.stringify(postgresqlconf);
  let cluster = made.get(key);
  if (!cluster) {
    cluster = initdb(form, postgresqlconf);
    made.set(key, cluster);
    // A failure is not remembered: the next cluster tries again.
    cluster.catch(() => made.delete(key));
  }
  return cluster;
}

async function initdb(form: 'folder' | 'tarball', postgresqlconf: string[]): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'strata-pglite-pristine-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const target = path.join(dir, form === 'folder' ? 'pgdata' : 'pgdata.tar');
  const script = [
    'const [entry, form, target, conf] = process.argv.slice(1);',
    'const { PGlite } = require(entry);',
    '(async () => {',
    "  const db = await PGlite.create({ ...(form === 'folder' ? { dataDir: target } : {}), postgresqlconf: JSON.parse(conf) });",
    "  if (form === 'tarball') require('node:fs').writeFileSync(target, Buffer.from(await (await db.dumpDataDir('none')).arrayBuffer()));",
    '  await db.close();',
    '})().catch((err) => { console.error(err); process.exit(1); });',
  ].join('\n');
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, ['-e', script, entry, form, target, JSON.stringify(postgresqlconf)], { timeout: 300_000 }, (err, _stdout, stderr) =>
      err ? reject(new Error(`creating a PGlite cluster failed: ${err.message}\n${stderr}`)) : resolve(),
    );
  });
  return target;
}
