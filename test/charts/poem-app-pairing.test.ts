import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parse, parseAllDocuments } from 'yaml';
import { modelServerSpec, type ModelServerSpec } from '../../controllers/api/index.js';
import { MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS } from '../../images/model-server/src/model-spec.js';
import { BUILT_IN_MODELS, loadTokenizer } from '../../images/model-server/src/served-models.js';
import { encodeChat } from '../../images/model-server/src/tokenizer.js';
import { POEM_TYPES } from '../../images/poem-app/src/poem-types.js';
import { buildPoemMessages } from '../../images/poem-app/src/poet.js';
import { MAX_THEME_LENGTH } from '../../images/poem-app/src/requests.js';
import { CHART_DIR, template, type RenderedObject } from './support/helm.js';

const root = path.resolve(import.meta.dirname, '../..');
const EXAMPLES = path.join(root, 'crds/examples');

interface PoemAppValues {
  apiBaseUrl: string;
  model: string;
  maxTokens: number;
}

/** The example ModelServers, by the in-cluster host:port their Service answers on. */
function exampleModelServers(): Map<string, { name: string; spec: ModelServerSpec }> {
  const servers = new Map<string, { name: string; spec: ModelServerSpec }>();
  for (const file of readdirSync(EXAMPLES).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(readFileSync(path.join(EXAMPLES, file), 'utf8'))) {
      const obj = doc.toJS() as { kind?: string; metadata: { name: string }; spec?: unknown } | null;
      if (obj?.kind !== 'ModelServer') continue;
      const spec = modelServerSpec.parse(obj.spec ?? {});
      servers.set(`${obj.metadata.name}-model-server:${spec.port}`, { name: obj.metadata.name, spec });
    }
  }
  return servers;
}

/** The longest prompt (in the model's tokens) the poem app sends: every form with a theme of the longest length. */
async function longestPoemPrompt(model: string): Promise<number> {
  const source = BUILT_IN_MODELS.find((m) => m.names.includes(model));
  if (!source) throw new Error(`${model} is not a built-in model`);
  const tokenizer = await loadTokenizer(source.dir);
  const theme = 'autumn rain on the old harbour wall '.repeat(10).slice(0, MAX_THEME_LENGTH);
  return Math.max(...POEM_TYPES.map((t) => encodeChat(buildPoemMessages(t, theme) as Array<{ role: 'system' | 'user'; content: string }>, tokenizer).length));
}

describe('the chart\'s poem app and the ModelServer it asks agree', function () {
  this.timeout(60_000);
  const valuesFiles = readdirSync(CHART_DIR).filter((f) => /^values.*\.yaml$/.test(f));

  for (const file of valuesFiles) {
    it(`${file}: max tokens within the model's output, prompts within its context or truncated`, async () => {
      const poemApp = (parse(readFileSync(path.join(CHART_DIR, file), 'utf8')) as { poemApp: PoemAppValues }).poemApp;
      const hostPort = new URL(poemApp.apiBaseUrl).host;
      const server = exampleModelServers().get(hostPort);
      expect(server, `a ModelServer in crds/examples answering ${hostPort}`).to.not.equal(undefined);
      expect(poemApp.model, 'the model the poem app asks').to.equal(server!.spec.model.name);
      expect(poemApp.maxTokens, 'poemApp.maxTokens').to.be.at.most(MAX_OUTPUT_TOKENS);
      const prompt = await longestPoemPrompt(poemApp.model);
      if (prompt > MAX_PROMPT_TOKENS) expect(server!.spec.truncatePrompt, `prompts of ${prompt} tokens > context ${MAX_PROMPT_TOKENS}: ModelServer ${server!.name} needs truncatePrompt`).to.equal(true);
    });
  }

  it('renders the poem app with its model, max tokens and a Secret-backed POEM_APP_API_KEY', async () => {
    const env = (objs: RenderedObject[]) => {
      const d = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-poem-app') as unknown as { spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } }> }> } } } };
      return Object.fromEntries(d.spec.template.spec.containers[0]!.env.map((e) => [e.name, e]));
    };
    const generated = await template(['poemApp.enabled=true']);
    const vars = env(generated);
    expect(vars.API_MAX_TOKENS!.value).to.equal(String(MAX_OUTPUT_TOKENS));
    expect(vars.API_MODEL!.value).to.equal('strata-verse');
    expect(vars.POEM_APP_API_KEY!.valueFrom!.secretKeyRef).to.deep.equal({ name: 'strata-poem-app-access', key: 'POEM_APP_API_KEY' });
    const secret = (objs: RenderedObject[]) => objs.find((o) => o.kind === 'Secret' && o.metadata.name === 'strata-poem-app-access') as RenderedObject & { stringData: Record<string, string> };
    expect(secret(generated).stringData.POEM_APP_API_KEY).to.match(/^[A-Za-z0-9]{32}$/);
    const given = await template(['poemApp.enabled=true', 'poemApp.accessKey=a-key-of-16-chars-or-more']);
    expect(secret(given).stringData.POEM_APP_API_KEY).to.equal('a-key-of-16-chars-or-more');
    expect(JSON.stringify(env(given))).to.not.contain('a-key-of-16-chars-or-more');
    const refused = await template(['poemApp.enabled=true', 'poemApp.accessKey=short']).then(() => undefined, (err: Error) => err);
    expect(refused?.message).to.match(/accessKey/);
  });
});
