// Reading the images' Dockerfiles: their instructions and stages, what a stage is built on (its own
// Dockerfile's earlier stages, the shared stages of hack/images/Dockerfile, an outside image), and what
// it installs with apt-get.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from './graph.js';

export interface Stage {
  /** The FROM line's image, as written (an ARG reference stays unexpanded). */
  from: string;
  name?: string;
  instructions: string[];
}

/** Instructions of a Dockerfile, continuation lines joined, comments left out. */
export function instructions(text: string): string[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
}

export function stages(text: string): Stage[] {
  const out: Stage[] = [];
  for (const line of instructions(text)) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) out.push({ from: from[1], name: from[2], instructions: [] });
    else out.at(-1)?.instructions.push(line);
  }
  return out;
}

/** The values of the Dockerfile's ARG defaults (ARG NAME=value), with `args` (--build-arg) over them. */
export function argDefaults(text: string, args: Readonly<Record<string, string>> = {}): Map<string, string> {
  const values = new Map<string, string>(Object.entries(args));
  for (const line of instructions(text)) {
    const m = /^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)/.exec(line);
    if (m && !values.has(m[1])) values.set(m[1], m[2]);
  }
  return values;
}

/** An image reference or stage name with the ARG values filled in. */
export function expandArgs(ref: string, values: ReadonlyMap<string, string>): string {
  return ref.replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (_, name: string) => values.get(name) ?? '');
}

/** Packages the RUN lines among these instructions install with `apt-get install`. */
export function aptInstalls(stage: { instructions: string[] }): string[] {
  const pkgs: string[] = [];
  for (const line of stage.instructions.filter((l) => /^RUN\s/.test(l))) {
    for (const command of line.slice(4).split(/&&|;|\|\|/)) {
      const words = command.trim().split(/\s+/);
      const at = words.indexOf('install');
      if (words[0] !== 'apt-get' || at < 0) continue;
      pkgs.push(...words.slice(at + 1).filter((w) => !w.startsWith('-')));
    }
  }
  return pkgs;
}

/** The Dockerfile of the stages every image starts from (hack/build-images.sh builds it first). */
export const SHARED_DOCKERFILE = 'hack/images/Dockerfile';

/** The stage of SHARED_DOCKERFILE an image reference names: strata-<target>, with any registry and tag. */
export function sharedTarget(ref: string): string | undefined {
  return /^(?:\S*\/)?strata-([a-z0-9-]+)(?::[\w.-]+)?$/.exec(ref)?.[1];
}

export interface ResolvedStage {
  /** The outside image it starts from, ARG values filled in. */
  base: string;
  /** The stages it is made of, the one on the outside image first and itself last, each with its Dockerfile. */
  layers: { file: string; stage: Stage }[];
  /** Their instructions in that order: what the stage runs on top of base. */
  instructions: string[];
}

/**
 * A stage of a Dockerfile (the last one where no name is given), followed through its FROM: to an earlier
 * stage, to a stage of the shared Dockerfile, down to an outside image. `args` stand for --build-arg.
 */
export function resolveStage(root: string, file: string, name?: string, args: Readonly<Record<string, string>> = {}): ResolvedStage {
  const text = readFileSync(path.join(root, file), 'utf8');
  const all = stages(text);
  const stage = name === undefined ? all.at(-1) : all.find((s) => s.name === name);
  if (!stage) throw new Error(`${file}: no stage ${name ?? '(no FROM)'}`);
  const from = expandArgs(stage.from, argDefaults(text, args));
  const earlier = all.slice(0, all.indexOf(stage)).find((s) => s.name?.toLowerCase() === from.toLowerCase());
  const target = sharedTarget(from);
  const below = earlier
    ? resolveStage(root, file, earlier.name, args)
    : target !== undefined && file !== SHARED_DOCKERFILE
      ? resolveStage(root, SHARED_DOCKERFILE, target, args)
      : undefined;
  const layer = { file, stage };
  if (!below) return { base: from, layers: [layer], instructions: [...stage.instructions] };
  return { base: below.base, layers: [...below.layers, layer], instructions: [...below.instructions, ...stage.instructions] };
}

/** Which stage of images/<name>/Dockerfile (by default the last, the runtime), the checkout, and --build-arg values. */
export interface ImageStageOptions {
  stage?: string;
  root?: string;
  args?: Readonly<Record<string, string>>;
}

/** A stage of an image's Dockerfile with all it is built on. */
export function imageStage(image: string, { stage, root = REPO_ROOT, args = {} }: ImageStageOptions = {}): ResolvedStage {
  return resolveStage(root, path.join('images', image, 'Dockerfile'), stage, args);
}
