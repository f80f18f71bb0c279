import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Document } from 'yaml';
import { loadOperatorEnv, settingsFrom } from './config.js';
import { RenderInputError, parseResources, renderResources, type RenderedObject } from './render.js';

const USAGE = "usage: operator render -f RESOURCES.yaml --namespace NAMESPACE (settings from the operator's environment, as the chart sets it)";

/** The rendered objects as multi-document YAML; create-once objects say so in a comment. */
export function toYaml(objects: RenderedObject[]): string {
  return objects
    .map(({ object, createOnce }) => {
      const doc = new Document(object);
      if (createOnce) doc.commentBefore = ' Created only when absent, never overwritten: generated values are fresh on every render.';
      return doc.toString({ lineWidth: 0 });
    })
    .join('---\n');
}

/**
 * `operator render`: print what the operator would apply for the resources of a file, with no
 * cluster. Returns the exit status: 0 rendered, 1 a bad file, 2 bad arguments.
 */
export function runRenderCommand(args: string[], env: NodeJS.ProcessEnv, out: (s: string) => void, err: (s: string) => void): number {
  let file: string | undefined;
  let namespace: string | undefined;
  try {
    const { values } = parseArgs({
      args,
      options: { file: { type: 'string', short: 'f' }, namespace: { type: 'string', short: 'n' } },
      strict: true,
      allowPositionals: false,
    });
    ({ file, namespace } = values);
  } catch (e) {
    err(`${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (!file || !namespace) {
    err(`${!file ? '-f' : '--namespace'} is required\n${USAGE}\n`);
    return 2;
  }
  try {
    const settings = settingsFrom(loadOperatorEnv(env));
    const text = file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8');
    out(toYaml(renderResources(parseResources(text, namespace), namespace, settings)));
    return 0;
  } catch (e) {
    const reason = e instanceof RenderInputError ? e.message : (e as NodeJS.ErrnoException).code === 'ENOENT' ? `no such file: ${file}` : (e as Error).message;
    err(`operator render: ${file}: ${reason}\n`);
    return 1;
  }
}
