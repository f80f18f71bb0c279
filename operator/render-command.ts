import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Document } from 'yaml';
import type { Manifest } from '../controllers/support/kube-client.js';
import { loadOperatorEnv, settingsFrom } from './config.js';
import { RenderInputError, SECRETS_MODES, omittedSecrets, parseResources, renderResources, type RenderedObject, type SecretsMode } from './render.js';

const USAGE =
  "usage: operator render -f RESOURCES.yaml --namespace NAMESPACE [--secrets=omit|generate] (settings from the operator's environment, as the chart sets it)";

/** One YAML document: plain YAML (no anchors or aliases, which some GitOps tools refuse), no line folding. */
function yamlDocument(object: object, comment?: string): string {
  const doc = new Document(object, { aliasDuplicateObjects: false });
  if (comment) doc.commentBefore = comment;
  return doc.toString({ lineWidth: 0 });
}

/**
 * The rendered objects as multi-document YAML; create-once objects say so in a comment, and so do
 * objects of the file passed through as given and the Secrets left out.
 */
export function toYaml(objects: RenderedObject[], foreign: Manifest[] = [], omitted: string[] = []): string {
  const docs = [
    ...foreign.map((object) => yamlDocument(object, ' Passed through from the resource file as given (not a Strata resource).')),
    ...objects.map(({ object, createOnce }) =>
      yamlDocument(object, createOnce ? ' Created only when absent, never overwritten: generated values are fresh on every render.' : undefined),
    ),
  ];
  const text = docs.join('---\n');
  if (omitted.length === 0) return text;
  const note =
    `# Secrets left out (--secrets=omit): ${omitted.join(', ')}. The operator creates them in the namespace\n` +
    '# (generated once, never rotated); render with --secrets=generate to see them with fresh values.\n';
  return note + text;
}

/**
 * `operator render`: print what the operator would apply for the resources of a file, with no
 * cluster. Returns the exit status: 0 rendered, 1 a bad file, 2 bad arguments.
 */
export function runRenderCommand(args: string[], env: NodeJS.ProcessEnv, out: (s: string) => void, err: (s: string) => void): number {
  let file: string | undefined;
  let namespace: string | undefined;
  let secrets: string | undefined;
  try {
    const { values } = parseArgs({
      args,
      options: { file: { type: 'string', short: 'f' }, namespace: { type: 'string', short: 'n' }, secrets: { type: 'string', default: 'omit' } },
      strict: true,
      allowPositionals: false,
    });
    ({ file, namespace, secrets } = values);
  } catch (e) {
    err(`${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (!file || !namespace) {
    err(`${!file ? '-f' : '--namespace'} is required\n${USAGE}\n`);
    return 2;
  }
  if (!SECRETS_MODES.includes(secrets as SecretsMode)) {
    err(`--secrets must be one of ${SECRETS_MODES.join(', ')} (got ${secrets})\n${USAGE}\n`);
    return 2;
  }
  const mode = secrets as SecretsMode;
  try {
    const settings = settingsFrom(loadOperatorEnv(env));
    const text = file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8');
    const { resources, foreign } = parseResources(text, namespace);
    const omitted = mode === 'omit' ? omittedSecrets(resources, namespace, settings) : [];
    out(toYaml(renderResources(resources, namespace, settings, mode), foreign, omitted));
    return 0;
  } catch (e) {
    const reason = e instanceof RenderInputError ? e.message : (e as NodeJS.ErrnoException).code === 'ENOENT' ? `no such file: ${file}` : (e as Error).message;
    err(`operator render: ${file}: ${reason}\n`);
    return 1;
  }
}
