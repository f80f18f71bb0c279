// Debian packages of the images' runtime stages, as this machine's dpkg and apt see them (the images'
// Debian release, bookworm, is this machine's): which package owns a shared library, which packages
// the base image already holds, what an `apt-get install --no-install-recommends` adds and its size.
import { execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';

function run(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20 });
}

/**
 * `fn` answering each argument once per process: what dpkg, apt and ldd say of a path or a package
 * does not change while the tests run, and the images share most libraries (each query costs a process).
 */
function once<R>(fn: (arg: string) => R): (arg: string) => R {
  const answers = new Map<string, R>();
  return (arg) => {
    if (!answers.has(arg)) answers.set(arg, fn(arg));
    return answers.get(arg)!;
  };
}

/** Package names of a Depends/Pre-Depends field, the first of each set of alternatives that `has` accepts (else the first). */
function dependsNames(field: string, has: (pkg: string) => boolean): string[] {
  return field
    .split(',')
    .map((group) => {
      const alternatives = group
        .split('|')
        .map((alt) => alt.trim().split(/[\s(]/)[0].replace(/:any$/, ''))
        .filter(Boolean);
      return alternatives.find(has) ?? alternatives[0];
    })
    .filter((name): name is string => !!name);
}

interface Installed {
  priority: string;
  essential: boolean;
  depends: string;
}

let installedCache: Map<string, Installed> | undefined;

/** Packages installed on this machine. */
function installed(): Map<string, Installed> {
  if (!installedCache) {
    installedCache = new Map();
    const out = run('dpkg-query', ['-W', '-f', '${Package}\t${Priority}\t${Essential}\t${Pre-Depends}, ${Depends}\t${db:Status-Abbrev}\n']);
    for (const line of out.split('\n').filter(Boolean)) {
      const [name, priority, essential, depends, status] = line.split('\t');
      if (status.trim() === 'ii') installedCache.set(name, { priority, essential: essential === 'yes', depends });
    }
  }
  return installedCache;
}

/** A package's Pre-Depends and Depends, from the archive (apt-cache) where it is not installed here. */
const depends = once((pkg: string): string => {
  const local = installed().get(pkg);
  if (local) return local.depends;
  const fields = run('apt-cache', ['show', '--no-all-versions', pkg]);
  return [...fields.matchAll(/^(?:Pre-Depends|Depends): (.*)$/gm)].map((m) => m[1]).join(', ');
});

/** `roots` and everything they depend on, stopping at packages in `stop`. */
function closure(roots: Iterable<string>, stop: ReadonlySet<string>): Set<string> {
  const known = (pkg: string) => installed().has(pkg);
  const found = new Set<string>();
  const queue = [...roots];
  while (queue.length) {
    const pkg = queue.pop()!;
    if (found.has(pkg) || stop.has(pkg)) continue;
    found.add(pkg);
    queue.push(...dependsNames(depends(pkg), known));
  }
  return found;
}

let baseCache: Set<string> | undefined;

/**
 * The packages of the base image (node:22-bookworm-slim): debian:bookworm-slim is debootstrap's minbase
 * variant, the Required and Essential packages and apt, with what they depend on; the Node image adds
 * only files under /usr/local, and keeps no package beyond these (it purges its download tools).
 */
export function basePackages(): ReadonlySet<string> {
  if (!baseCache) {
    const roots = [...installed()].filter(([, p]) => p.priority === 'required' || p.essential).map(([name]) => name);
    baseCache = closure([...roots, 'apt'], new Set());
  }
  return baseCache;
}

/** What `apt-get install --no-install-recommends pkgs` adds to the base image. */
export function aptAdds(pkgs: string[]): Set<string> {
  return closure(pkgs, basePackages());
}

/** Bytes a package takes once installed (its Installed-Size, in KiB). */
export const installedBytes = once((pkg: string): number => {
  const out = installed().has(pkg)
    ? run('dpkg-query', ['-W', '-f', '${Installed-Size}', pkg])
    : /^Installed-Size: (\d+)$/m.exec(run('apt-cache', ['show', '--no-all-versions', pkg]))?.[1];
  if (!out) throw new Error(`no Installed-Size for ${pkg}`);
  return Number(out.trim()) * 1024;
});

/**
 * The package that owns a shared library: dpkg knows files by the path its package installed, so the
 * path ldd printed, its /usr-merged twin, and the file behind the links (alternatives) are tried in turn.
 */
export const libraryPackage = once((lib: string): string | undefined => {
  const candidates = [lib, lib.startsWith('/usr/') ? lib.slice(4) : `/usr${lib}`, realpathSync(lib)];
  for (const candidate of candidates) {
    try {
      return run('dpkg-query', ['-S', candidate]).split(':')[0].trim();
    } catch {
      // not this path; the next
    }
  }
  return undefined;
});

/** Shared libraries a binary loads, as ldd resolves them here: soname to path, or null when not found. */
export const sharedLibraries = once((binary: string): ReadonlyMap<string, string | null> => {
  const libs = new Map<string, string | null>();
  for (const line of run('ldd', [binary]).split('\n')) {
    const m = /^\s*(\S+) => (?:(\/\S+) \(0x|not found)/.exec(line);
    if (m) libs.set(m[1], m[2] ?? null);
  }
  return libs;
});
