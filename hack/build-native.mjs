// Builds the FAISS binding (images/image-search/native, or STRATA_FAISS_BINDING_DIR) with node-gyp
// against Debian's FAISS, when it is not built yet or its sources are newer. Quiet when there is nothing
// to build; one line when it builds. Where it cannot be built (no libfaiss-dev, no compiler) it says why
// and what to install in two lines and exits 0: image search then runs on its exact in-process index,
// and nothing else needs the binding. (`npm start` runs this first: its lines come before the banner.)
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

/** The line of a failed build that says why: the compiler's or linker's first error, else node-gyp's. */
function reason(output) {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const compiler = lines.filter((l) => !l.startsWith('gyp') && /\berror\b|cannot find|not found/i.test(l));
  return (compiler.length ? compiler : lines.filter((l) => l.startsWith('gyp ERR!')))[0] ?? 'the build failed';
}

const BUILDING = 'Building the FAISS binding for image search (once)...';

/** Two lines: what failed and why (finishing the "Building" line when one was started), then what to do. */
function fail(why, building) {
  const head = building ? ' ' : 'Image search: ';
  process.stdout.write(`${head}FAISS binding not built: ${why}\n  Image search runs on an exact in-process index; for FAISS: ${ENABLE}\n`);
}

if (existsSync(path.join(dir, 'binding.gyp')) && !upToDate()) {
  let nodeGyp;
  try {
    nodeGyp = createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js');
  } catch {
    fail('node-gyp is not installed (a development dependency: npm ci without --omit=dev)', false);
    process.exit(0);
  }
  // The running Node's own headers where its installation ships them (Debian, NodeSource, the official
  // tarballs): node-gyp then downloads nothing.
  const prefix = path.dirname(path.dirname(process.execPath));
  const nodedir = !process.env.npm_config_nodedir && existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? [`--nodedir=${prefix}`] : [];
  process.stdout.write(BUILDING);
  const args = [nodeGyp, 'rebuild', '--loglevel=error', ...nodedir, '--directory', dir];
  const build = spawnSync(process.execPath, args, { encoding: 'utf8', env: { ...process.env, MAKEFLAGS: '-s' } });
  if (build.status !== 0) fail(reason(`${build.stderr ?? ''}\n${build.stdout ?? ''}\n${build.error?.message ?? ''}`), true);
  else process.stdout.write(' done\n');
}
