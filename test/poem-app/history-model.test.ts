import path from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { PoemStore } from '../../images/poem-app/src/poem-store.js';
import { TEST_MODEL, getJson, postJson, poemAppOnFakeUpstream, tempDir } from './support/poem-app-harness.js';

describe('poem-app: saved poems keep the model that wrote them', () => {
  const env = poemAppOnFakeUpstream('poem-history-model');

  it('a generated poem saved with its model is reopened with it (GET one and the list)', async () => {
    const generated = await postJson(`${env.app.url}/api/generate-poem`, { type: 'haiku', theme: 'moss' });
    expect(generated.body.model).to.equal(TEST_MODEL);
    const saved = await postJson(`${env.app.url}/api/poems`, { type: 'Haiku', theme: 'moss', content: generated.body.poem, model: generated.body.model });
    expect(saved.status).to.equal(201);
    expect(saved.body.model).to.equal(TEST_MODEL);
    expect((await getJson(`${env.app.url}/api/poems/${saved.body.id}`)).body.model).to.equal(TEST_MODEL);
    expect((await getJson(`${env.app.url}/api/poems`)).body.poems[0].model).to.equal(TEST_MODEL);
    // Without one (a poem typed in by hand) the model is null, not made up.
    const typed = await postJson(`${env.app.url}/api/poems`, { type: 'Haiku', theme: 'moss', content: 'by hand' });
    expect(typed.body.model).to.equal(null);
  });

  it('refuses a model that is not a string or too long, storing nothing', async () => {
    const before = (await getJson(`${env.app.url}/api/poems?limit=500`)).body.poems.length;
    for (const model of [42, 'm'.repeat(201)]) {
      const res = await postJson(`${env.app.url}/api/poems`, { type: 'Haiku', theme: 'moss', content: 'x', model });
      expect(res.status).to.equal(400);
      expect(res.body.error.details[0].field).to.equal('model');
    }
    expect((await getJson(`${env.app.url}/api/poems?limit=500`)).body.poems.length).to.equal(before);
  });

  it('migrates a history database of the first schema forward: old poems stay, with no model', () => {
    const tmp = tempDir('poem-history-v1');
    const file = path.join(tmp.dir, 'poems.db');
    try {
      // The first schema, exactly as shipped, with one poem in it.
      const old = new Database(file);
      old.exec(`CREATE TABLE poems (
        id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, theme TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL);
        CREATE INDEX poems_newest_first ON poems (created_at DESC, id DESC);`);
      old.prepare('INSERT INTO poems (type, theme, content, created_at) VALUES (?, ?, ?, ?)').run('Sonnet', 'old', 'kept', '2026-01-01T00:00:00.000Z');
      old.pragma('user_version = 1');
      old.close();

      const store = PoemStore.open(file);
      try {
        expect(store.get(1)).to.deep.equal({ id: 1, type: 'Sonnet', theme: 'old', content: 'kept', model: null, createdAt: '2026-01-01T00:00:00.000Z' });
        expect(store.add({ type: 'Haiku', theme: 'new', content: 'x', model: 'strata-verse' }).model).to.equal('strata-verse');
      } finally {
        store.close();
      }
      const reopened = new Database(file);
      expect(reopened.pragma('user_version', { simple: true })).to.equal(2);
      reopened.close();
    } finally {
      tmp.remove();
    }
  });
});
