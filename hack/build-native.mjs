// Builds the FAISS binding (images/image-search/native, or STRATA_FAISS_BINDING_DIR) with node-gyp
// against Debian's FAISS, when it is not built yet or its sources are newer. Quiet when it works.
// Where it cannot be built (no libfaiss-dev, no compiler) it says why in a few lines and exits 0:
// image search then runs on its exact in-process index, and nothing else needs the binding.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const ENABLE = 'apt-get install g++ make python3 libfaiss-dev libopenblas-dev, then npm run build:native';
const dir = path.resolve(process.env.STRATA_FAISS_BINDING_DIR?.trim() || 'images/image-search/native');

function upToDate() {
  const built = path.join(dir, 'build', 'Release', 'strata_faiss.node');
  if (!existsSync(built)) return false;
  const sources = readdirSync(dir).filter((f) => /\.(cc|cpp|h|gyp)$/.test(f));
  return sources.every((f) => statSync(path.join(dir, f)).mtimeMs < statSync(built).mtimeMs);
}

/** The lines of a failed build that say why: the compiler's or linker's errors first, else node-gyp's. */
function reasons(output) {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const compiler = lines.filter((l) => !l.startsWith('gyp') && /\berror\b|cannot find|not found/i.test(l));
  return (compiler.length ? compiler : lines.filter((l) => l.startsWith('gyp ERR!'))).slice(0, 3);
}

function fail(why) {
  console.log(
    `Image search: FAISS binding not built, so it will run on an exact in-process index.\n${why.map((l) => `  ${l}`).join('\n')}\n  For FAISS: ${ENABLE}`,
  );
}

if (existsSync(path.join(dir, 'binding.gyp')) && !upToDate()) {
  let nodeGyp;
  try {
    nodeGyp = createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js');
  } catch {
    fail(['node-gyp is not installed (a development dependency: npm ci without --omit=dev)']);
    process.exit(0);
  }
  // The running Node's own headers where its installation ships them (Debian, NodeSource, the official
  // tarballs): node-gyp then downloads nothing.
  const prefix = path.dirname(path.dirname(process.execPath));
  const nodedir = !process.env.npm_config_nodedir && existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? [`--nodedir=${prefix}`] : [];
  console.log('Building the FAISS binding for image search (once)...');
  const args = [nodeGyp, 'rebuild', '--loglevel=error', ...nodedir, '--directory', dir];
  const build = spawnSync(process.execPath, args, { encoding: 'utf8', env: { ...process.env, MAKEFLAGS: '-s' } });
  if (build.status !== 0) fail(reasons(`${build.stderr ?? ''}\n${build.stdout ?? ''}\n${build.error?.message ?? ''}`));
}
