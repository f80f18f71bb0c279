// The shared libraries an image's native code links, and the Debian packages its runtime stage must
// install for them: every native addon (.node) and shared object the image carries is run through ldd
// here, and each library it resolves is either carried by the image itself or owned by a package.
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { basePackages, libraryPackage, sharedLibraries } from './debian.js';
import { REPO_ROOT, type ImageFile } from './graph.js';

export interface LinkedLibraries {
  /** Binaries of the image that ldd examined (repository paths). */
  binaries: string[];
  /** Package owning each library that the image does not carry, with the libraries by soname. */
  packages: Map<string, string[]>;
  /** Libraries ldd could not resolve, as `binary: soname`. */
  missing: string[];
}

/** Native addons and shared objects among the image's files. */
export function nativeBinaries(files: ImageFile[]): string[] {
  return files.map((f) => f.source).filter((s) => /\.node$|\.so(\.\d+)*$/.test(s));
}

export function linkedLibraries(files: ImageFile[], root = REPO_ROOT): LinkedLibraries {
  const binaries = nativeBinaries(files);
  const carried = new Set(files.map((f) => realpathSync(path.join(root, f.source))));
  const packages = new Map<string, string[]>();
  const missing: string[] = [];
  for (const binary of binaries) {
    for (const [soname, resolved] of sharedLibraries(path.join(root, binary))) {
      if (resolved === null) {
        missing.push(`${binary}: ${soname}`);
        continue;
      }
      if (carried.has(realpathSync(resolved))) continue;
      const pkg = libraryPackage(resolved);
      if (!pkg) {
        missing.push(`${binary}: ${soname} (${resolved} belongs to no package)`);
        continue;
      }
      const sonames = packages.get(pkg) ?? [];
      if (!sonames.includes(soname)) sonames.push(soname);
      packages.set(pkg, sonames);
    }
  }
  return { binaries, packages, missing };
}

/** The packages a runtime stage must install: those owning linked libraries, less the base image's. */
export function requiredPackages(linked: LinkedLibraries): string[] {
  const base = basePackages();
  return [...linked.packages.keys()].filter((p) => !base.has(p)).sort();
}
