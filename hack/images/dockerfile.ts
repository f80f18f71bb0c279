// Reading the images' Dockerfiles: their instructions and stages, and what a stage installs with apt-get.
import { readFileSync } from 'node:fs';
import path from 'node:path';

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

/** The values of the Dockerfile's ARG defaults (ARG NAME=value). */
export function argDefaults(text: string): Map<string, string> {
  const args = new Map<string, string>();
  for (const line of instructions(text)) {
    const m = /^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)/.exec(line);
    if (m && !args.has(m[1])) args.set(m[1], m[2]);
  }
  return args;
}

/** The stage's FROM image with ARG defaults filled in. */
export function baseImage(text: string, stage: Stage): string {
  const args = argDefaults(text);
  return stage.from.replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (_, name: string) => args.get(name) ?? '');
}

/** Packages the stage's RUN lines install with `apt-get install`. */
export function aptInstalls(stage: Stage): string[] {
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

export function readDockerfile(root: string, image: string): string {
  return readFileSync(path.join(root, 'images', image, 'Dockerfile'), 'utf8');
}

/** The stage the image runs: the last one. */
export function runtimeStage(text: string): Stage {
  const all = stages(text);
  if (!all.length) throw new Error('no FROM in Dockerfile');
  return all.at(-1)!;
}
