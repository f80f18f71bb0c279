// What one container image holds, derived from its entry module: the project modules its JavaScript
// loads, the npm packages those import (with everything the packages depend on, as installed), and the
// files the build copies into the image. The image build (build.ts) copies exactly these files and the
// size report (size-report.ts) sums them, so what is reported is what is shipped.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import ts from 'typescript';
import { compiledPath, SOURCE_ONLY_PACKAGES, type ImageSpec } from './images.js';

export const REPO_ROOT = path.resolve(import.meta.dirname, '../..');

/** Project folders whose modules go into images; a module elsewhere (hack/) is development-only. */
const IMAGE_ROOTS = ['images/', 'operator/', 'controllers/'];

/** The compiler options of the project's tsconfig.json, as the image build compiles with them. */
export function compilerOptions(root = REPO_ROOT): ts.CompilerOptions {
  const file = path.join(root, 'tsconfig.json');
  const { config, error } = ts.readConfigFile(file, ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  return ts.parseJsonConfigFileContent(config, ts.sys, root).options;
}

const transpiled = new Map<string, string>();

/** One module's JavaScript (isolatedModules holds project-wide, so each file compiles on its own). */
export function transpile(file: string, options: ts.CompilerOptions): string {
  const source = readFileSync(file, 'utf8');
  if (!file.endsWith('.ts')) return source;
  // The images share most modules, and every test of them walks the graph again: one transpile per
  // file, text and options in a process.
  const key = `${file}\0${JSON.stringify(options)}\0${source}`;
  let js = transpiled.get(key);
  if (js === undefined) {
    // ES modules: the package.json's "type": "module" makes every .ts one (NodeNext's rule, which a
    // single-file transpile cannot look up).
    const compilerOptions = { ...options, module: ts.ModuleKind.ES2022, moduleResolution: ts.ModuleResolutionKind.Bundler };
    js = ts.transpileModule(source, { compilerOptions, fileName: file }).outputText;
    transpiled.set(key, js);
  }
  return js;
}

/** Module specifiers the JavaScript loads: static and dynamic imports, require, require.resolve, new URL(…, import.meta.url). */
export function specifiers(js: string): string[] {
  const found = ts.preProcessFile(js, true, true).importedFiles.map((f) => f.fileName);
  for (const m of js.matchAll(/(?:\brequire|\))\.resolve\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1]);
  for (const m of js.matchAll(/new URL\(\s*['"](\.[^'"]+)['"]\s*,\s*import\.meta\.url\s*\)/g)) found.push(m[1]);
  return [...new Set(found)];
}

const BUILTINS = new Set(builtinModules);

function isBuiltin(spec: string): boolean {
  return spec.startsWith('node:') || BUILTINS.has(spec) || BUILTINS.has(spec.split('/')[0]);
}

/** The package a bare specifier names: `a` of `a/sub`, `@s/a` of `@s/a/sub`. */
export function packageName(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

export interface ModuleGraph {
  /** Project files the image loads, relative to the repository root (.ts modules and loaded assets such as .mjs). */
  modules: string[];
  /** Packages the modules import by name. */
  packages: string[];
  /** Project files outside the image roots that modules refer to (development-only, left out of the image). */
  leftOut: string[];
  /** Project folders that modules refer to by path (new URL('../model', import.meta.url)): the image's assets must hold them. */
  folders: string[];
}

/** The file a relative specifier in `from` names: the .ts source of a .js specifier, else the file itself. */
function resolveRelative(from: string, spec: string, root: string): string | undefined {
  const target = path.resolve(path.dirname(path.join(root, from)), spec);
  const candidates = spec.endsWith('.js') ? [target.replace(/\.js$/, '.ts'), target] : [target];
  const hit = candidates.find((c) => existsSync(c) && statSync(c).isFile());
  return hit && path.relative(root, hit);
}

export function moduleGraph(entry: string, root = REPO_ROOT): ModuleGraph {
  const options = compilerOptions(root);
  const modules = new Set<string>();
  const packages = new Set<string>();
  const leftOut = new Set<string>();
  const folders = new Set<string>();
  const queue = [entry];
  while (queue.length) {
    const file = queue.pop()!;
    if (modules.has(file)) continue;
    modules.add(file);
    for (const spec of specifiers(transpile(path.join(root, file), options))) {
      if (isBuiltin(spec)) continue;
      if (!spec.startsWith('.')) {
        if (!SOURCE_ONLY_PACKAGES.includes(packageName(spec))) packages.add(packageName(spec));
        continue;
      }
      const folder = path.resolve(path.dirname(path.join(root, file)), spec);
      if (existsSync(folder) && statSync(folder).isDirectory()) {
        folders.add(path.relative(root, folder));
        continue;
      }
      const target = resolveRelative(file, spec, root);
      if (!target) throw new Error(`${file}: cannot resolve ${spec}`);
      if (!IMAGE_ROOTS.some((r) => target.startsWith(r))) leftOut.add(target);
      else queue.push(target);
    }
  }
  return { modules: [...modules].sort(), packages: [...packages].sort(), leftOut: [...leftOut].sort(), folders: [...folders].sort() };
}

interface PackageJson {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** Node's lookup of package `name` from folder `fromDir` (relative to root): the nearest node_modules/name above it. */
function findPackage(name: string, fromDir: string, root: string): string | undefined {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir === '.' ? '' : dir, 'node_modules', name);
    if (existsSync(path.join(root, candidate, 'package.json'))) return candidate;
    if (dir === '.' || dir === '') return undefined;
  }
}

/**
 * The installed package folders (relative to root) that `names` need: each package and, transitively,
 * its dependencies, and the optional and peer dependencies that are installed (a platform's prebuilt
 * binary package is installed only on its platform).
 */
export function packageClosure(names: string[], root = REPO_ROOT): string[] {
  const rootPkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as PackageJson;
  const found = new Set<string>();
  const queue: string[] = [];
  for (const name of names) {
    if (!rootPkg.dependencies?.[name]) throw new Error(`${name} is imported by image code but is not a production dependency in package.json`);
    const dir = findPackage(name, '.', root);
    if (!dir) throw new Error(`${name} is not installed (npm ci)`);
    queue.push(dir);
  }
  while (queue.length) {
    const dir = queue.pop()!;
    if (found.has(dir)) continue;
    found.add(dir);
    const pkg = JSON.parse(readFileSync(path.join(root, dir, 'package.json'), 'utf8')) as PackageJson;
    for (const [deps, required] of [
      [pkg.dependencies, true],
      [pkg.optionalDependencies, false],
      [pkg.peerDependencies, false],
    ] as const) {
      for (const dep of Object.keys(deps ?? {})) {
        const target = findPackage(dep, dir, root);
        if (target) queue.push(target);
        else if (required && !pkg.optionalDependencies?.[dep]) throw new Error(`${dir} needs ${dep}, which is not installed`);
      }
    }
  }
  return [...found].sort();
}

/**
 * Files inside installed packages that nothing loads at run time, left out of images: onnxruntime-node's
 * binaries for other platforms (it ships every platform's in one package and loads
 * bin/napi-v6/<platform>/<arch>); type declarations and source maps; C and C++ sources, objects and
 * archives; a package's own tests; in a package built by node-gyp (`gyp`), the vendored sources under
 * deps/ and the build folder's intermediate files (the addon is build/Release/*.node).
 */
export function unusedAtRunTime(file: string, gyp: boolean, platform: string = process.platform, arch: string = process.arch): boolean {
  const onnx = /(?:^|\/)node_modules\/onnxruntime-node\/bin\/napi-v\d+\/([^/]+)\/([^/]+)\//.exec(file);
  if (onnx) return onnx[1] !== platform || onnx[2] !== arch;
  if (/\.d\.[cm]?ts$|\.map$|\.(c|cc|cpp|h|hpp|o|a|gyp|gypi)$/.test(file)) return true;
  const inPackage = /(?:^|\/)node_modules\/(?:@[^/]+\/)?[^/]+\/(.*)$/.exec(file)?.[1];
  if (inPackage === undefined) return false;
  // Folders come with a trailing slash: build/ and build/Release/ are walked for the addons inside.
  if (gyp && (/^deps\//.test(inPackage) || (/^build\//.test(inPackage) && !/^build\/(Release\/([^/]+\.node)?)?$/.test(inPackage)))) return true;
  return /^(test|tests|__tests__)\//.test(inPackage);
}

/** Packages that hold only type declarations. */
function typesOnly(dir: string): boolean {
  return /(?:^|\/)node_modules\/@types\/[^/]+$/.test(dir);
}

/** Regular files under `dir` (relative to root), not descending into the folders `skip` accepts. */
function walk(dir: string, root: string, skip: (rel: string) => boolean, out: string[] = []): string[] {
  const abs = path.join(root, dir);
  if (statSync(abs).isFile()) {
    out.push(dir);
    return out;
  }
  for (const entry of readdirSync(abs, { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!skip(rel)) walk(rel, root, skip, out);
    } else if (entry.isFile()) out.push(rel);
  }
  return out;
}

export interface ImageFile {
  /** Where the file comes from, relative to the repository root. */
  source: string;
  /** Where it goes, relative to the image's /app. */
  target: string;
  /** Compile TypeScript to JavaScript on the way. */
  compile: boolean;
}

export interface ImageContents {
  graph: ModuleGraph;
  packageDirs: string[];
  files: ImageFile[];
}

/** Everything an image's build copies into /app: compiled modules, assets, the packages they import. */
export function imageContents(spec: ImageSpec, root = REPO_ROOT, platform: string = process.platform, arch: string = process.arch): ImageContents {
  const graph = moduleGraph(spec.entry, root);
  const packageDirs = packageClosure(graph.packages, root);
  const files: ImageFile[] = graph.modules.map((m) => ({ source: m, target: compiledPath(m), compile: m.endsWith('.ts') }));
  // Files beside the code that are read by path (SQL migrations, example rules): every non-TypeScript file in a src folder the image loads from.
  const srcDirs = new Set(graph.modules.map((m) => /^(images\/[^/]+\/src)\//.exec(m)?.[1]).filter((d): d is string => !!d));
  for (const dir of srcDirs) {
    for (const file of walk(dir, root, () => false)) {
      if (!file.endsWith('.ts') && !graph.modules.includes(file)) files.push({ source: file, target: `dist/${file}`, compile: false });
    }
  }
  for (const folder of graph.folders) {
    if (!spec.assets.some((a) => a === folder || a.startsWith(`${folder}/`)))
      throw new Error(`${spec.name}: its code reads ${folder}, which is not among its assets`);
  }
  for (const asset of spec.assets) {
    if (!existsSync(path.join(root, asset))) throw new Error(`${spec.name}: asset ${asset} is missing`);
    for (const file of walk(asset, root, () => false)) files.push({ source: file, target: `dist/${file}`, compile: false });
  }
  for (const dir of packageDirs.filter((d) => !typesOnly(d))) {
    const gyp = existsSync(path.join(root, dir, 'binding.gyp'));
    // A package's own node_modules holds packages of their own; those selected are listed separately.
    const skip = (rel: string) => rel === path.join(dir, 'node_modules') || unusedAtRunTime(`${rel}/`, gyp, platform, arch);
    for (const file of walk(dir, root, skip)) {
      if (!unusedAtRunTime(file, gyp, platform, arch)) files.push({ source: file, target: file, compile: false });
    }
  }
  return { graph, packageDirs, files };
}

/** Bytes the files take in the image: as they sit on this machine, modules as compiled. */
export function filesBytes(files: ImageFile[], root = REPO_ROOT): number {
  const options = compilerOptions(root);
  let sum = 0;
  for (const f of files) {
    const source = path.join(root, f.source);
    sum += f.compile ? Buffer.byteLength(transpile(source, options)) : statSync(source).size;
  }
  return sum;
}
