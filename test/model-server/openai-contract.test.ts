import { expect } from 'chai';
import { startModelServer } from '../../images/model-server/src/app.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { postJson } from './helpers.js';

const MODEL = 'strata-tiny';
const user = (content: string) => [{ role: 'user', content }];

function expectError(res: { status: number; body: any }, status: number, param: string | null, code: string): void { // eslint-disable-line @typescript-eslint/no-explicit-any
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(Object.keys(res.body)).to.deep.equal(['error']);
  expect(res.body.error).to.include({ param, code });
  expect(res.body.error.message).to.be.a('string').and.not.equal('');
  expect(res.body.error.type).to.be.a('string');
}

describe('model-server: what it cannot do is refused in OpenAI shape', () => {
  let server: RunningService;
  let url: string;

  before(async () => {
    server = await startModelServer({ port: 0, host: '127.0.0.1', logger: createLogger('model-server-test', 'silent') });
    url = `${server.url}/v1/chat/completions`;
  });
  after(async () => server.stop());

  describe('prompts past the context', () => {
    it('answers 400 context_length_exceeded for a ~0.9 MB prompt (no stack overflow), and the server keeps serving', async () => {
      const huge = 'a '.repeat(450_000);
      expect(huge.length).to.be.greaterThan(800_000);
      const res = await postJson(url, { model: MODEL, messages: user(huge) });
      expectError(res, 400, 'messages', 'context_length_exceeded');
      expect(res.body.error.type).to.equal('invalid_request_error');
      // Many messages too (one spread per message would not overflow; their total must still be counted).
      const many = Array.from({ length: 20_000 }, () => ({ role: 'user', content: '10 20' }));
      expectError(await postJson(url, { model: MODEL, messages: many }), 400, 'messages', 'context_length_exceeded');
      expect((await postJson(url, { model: MODEL, messages: user('10 20'), temperature: 0 })).body.choices[0].message.content).to.equal('10 20');
    });

    it('answers 400 context_length_exceeded just past the context', async () => {
      const words = Array.from({ length: 63 }, (_, i) => String(100 + i)).join(' ');
      expectError(await postJson(url, { model: MODEL, messages: user(words) }), 400, 'messages', 'context_length_exceeded');
    });
  });
});
