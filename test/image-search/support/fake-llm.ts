// A small OpenAI-compatible chat-completions server for tests (listens on port 0).
// It answers the prompts the image-search assistant sends and asks for tool calls when tools are offered;
// /v1/models lists `models`, and a chat request for another model gets OpenAI's 404 model_not_found.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

interface Message {
  role: string;
  content?: string | null;
  tool_calls?: unknown[];
}

export interface FakeLlm {
  url: string;
  requests: Array<{ authorization?: string; body: { model: string; messages: Message[]; tools?: unknown[] } }>;
  failNext: number;
  /** What /v1/models lists (first = default); chat requests for other models answer 404. */
  models: string[];
  close(): Promise<void>;
}

function completion(model: string, message: Record<string, unknown>, finish = 'stop') {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 0,
    model,
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
  };
}

function answer(body: FakeLlm['requests'][number]['body']): Record<string, unknown> {
  const last = body.messages[body.messages.length - 1];
  const text = String(last.content ?? '');
  const lastUser = String([...body.messages].reverse().find((m) => m.role === 'user')?.content ?? '');
  if (body.tools) {
    const call = (name: string, args: unknown) => ({
      content: null,
      tool_calls: [{ id: `call_${body.messages.length}`, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
    });
    if (/loop/i.test(lastUser)) return call('search_by_text', { query: 'loop', topk: 1 });
    if (last.role === 'tool') {
      const result = JSON.parse(text) as { results?: unknown[]; totalVectors?: number; error?: string };
      if (result.error) return { content: `The tool failed: ${result.error}` };
      return { content: result.results ? `I found ${result.results.length} images.` : `The index holds ${result.totalVectors} vectors.` };
    }
    if (/status/i.test(text)) return call('get_index_status', {});
    return call('search_by_text', { query: text.replace(/^find\s+/i, ''), topk: 3 });
  }
  if (text.includes('alternative short descriptions')) return { content: '1. crimson things\n2. "scarlet objects"\n- red pictures' };
  if (text.includes('explain how these results')) return { content: 'These images are mostly red.' };
  if (text.includes('Answer the question')) return { content: 'The red images are ids listed above.' };
  return { content: 'ok' };
}

export async function startFakeLlm(apiKey: string, models = ['strata-test-model']): Promise<FakeLlm> {
  const fake: Partial<FakeLlm> = { requests: [], failNext: 0, models };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const send = (status: number, payload: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(payload));
      };
      if (req.headers.authorization !== `Bearer ${apiKey}`) return send(401, { error: { message: 'bad key' } });
      if (fake.failNext! > 0) {
        fake.failNext!--;
        return send(500, { error: { message: 'upstream exploded' } });
      }
      if (req.method === 'GET' && req.url === '/v1/models') {
        return send(200, { object: 'list', data: fake.models!.map((id) => ({ id, object: 'model', created: 0, owned_by: 'test' })) });
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return send(404, { error: { message: 'not found' } });
      const body = JSON.parse(raw) as FakeLlm['requests'][number]['body'];
      fake.requests!.push({ authorization: req.headers.authorization, body });
      if (!fake.models!.includes(body.model)) {
        return send(404, {
          error: { message: `The model \`${body.model}\` does not exist`, type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
        });
      }
      const message = answer(body);
      send(200, completion(body.model, message, message.tool_calls ? 'tool_calls' : 'stop'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return fake as FakeLlm;
}
