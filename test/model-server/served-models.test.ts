import path from 'node:path';
import { expect } from 'chai';
import { BUILT_IN_MODELS, DEFAULT_MODEL_DIR, configuredModelSources } from '../../images/model-server/src/served-models.js';
import { getJson, modelServerForSuite, postJson } from './helpers.js';

const VERSE_DIR = path.join(DEFAULT_MODEL_DIR, 'strata-verse');

describe('model-server: a model name loads only its own weights', () => {
  it('no folder and no names: both built-in models, each from its own folder', () => {
    expect(configuredModelSources(undefined, undefined)).to.deep.equal(BUILT_IN_MODELS.map((m) => ({ names: m.names, dir: m.dir })));
  });

  it('MODEL_NAMES=strata-verse alone serves strata-verse from its own folder (what a ModelServer of that model sets)', () => {
    expect(configuredModelSources(undefined, ['strata-verse'])).to.deep.equal([{ names: ['strata-verse'], dir: VERSE_DIR }]);
    expect(configuredModelSources(undefined, ['strata-tiny', 'strata-verse'])).to.deep.equal([
      { names: ['strata-tiny'], dir: DEFAULT_MODEL_DIR },
      { names: ['strata-verse'], dir: VERSE_DIR },
    ]);
  });

  it('a name that is no built-in model needs MODEL_DIR; a built-in name never serves another folder', () => {
    expect(() => configuredModelSources(undefined, ['my-model'])).to.throw(/MODEL_NAMES my-model: not a built-in model.*MODEL_DIR/);
    expect(() => configuredModelSources(DEFAULT_MODEL_DIR, ['strata-verse'])).to.throw(/strata-verse is the built-in model's/);
    expect(() => configuredModelSources('/models/mine', ['strata-tiny'])).to.throw(/strata-tiny is the built-in model's/);
    expect(configuredModelSources('/models/mine', ['mine'])).to.deep.equal([{ names: ['mine'], dir: '/models/mine' }]);
  });

  it('MODEL_DIR without names answers to its built-in name, else to the path (as vLLM)', () => {
    expect(configuredModelSources(VERSE_DIR, undefined)).to.deep.equal([{ names: ['strata-verse'], dir: VERSE_DIR }]);
    expect(configuredModelSources('/models/mine', undefined)).to.deep.equal([{ names: ['/models/mine'], dir: '/models/mine' }]);
  });

  describe('served', () => {
    const ms = modelServerForSuite({ modelNames: ['strata-verse'] });

    it('answers as strata-verse with verse (its weights and tokenizer), not token ids', async () => {
      expect((await getJson(`${ms.base}/v1/models`)).body.data.map((m: { id: string }) => m.id)).to.deep.equal(['strata-verse']);
      const res = await postJson(ms.url, { model: 'strata-verse', messages: [{ role: 'user', content: 'Write a haiku on the theme "rain".' }], seed: 1 });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.choices[0].message.content)
        .to.match(/\p{L}{2,}/u)
        .and.not.match(/^\d+( \d+)*$/);
    });
  });
});
