// Builds the project's native addons (the FAISS binding) with node-gyp against the system libraries.
// Skips an addon whose binding.gyp is absent, and one already built and newer than its sources.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const addons = ['images/image-search/native'];
for (const dir of addons) {
  if (!existsSync(path.join(dir, 'binding.gyp'))) continue;
  const built = path.join(dir, 'build', 'Release');
  const out = existsSync(built) ? readdirSync(built).filter((f) => f.endsWith('.node')) : [];
  const newest = Math.max(...readdirSync(dir).filter((f) => /\.(cc|cpp|h|gyp)$/.test(f)).map((f) => statSync(path.join(dir, f)).mtimeMs));
  if (out.length && out.every((f) => statSync(path.join(built, f)).mtimeMs > newest)) continue;
  console.log(`building native addon in ${dir}`);
  execFileSync('npx', ['node-gyp', 'rebuild', '--directory', dir], { stdio: 'inherit' });
}
