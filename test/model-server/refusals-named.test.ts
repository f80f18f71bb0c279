import { expect } from 'chai';
import OpenAI from 'openai';
import { modelServerForSuite } from './helpers.js';

const MODEL = 'strata-tiny';

/** The refusal the official client raises for a request (fails the test when there is none). */
async function refusal(client: OpenAI, extra: Record<string, unknown>, messages: unknown = [{ role: 'user', content: '10 20' }]) {
  try {
    await client.chat.completions.create({ model: MODEL, messages, ...extra } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
  } catch (err) {
    expect(err).to.be.instanceOf(OpenAI.BadRequestError);
    return err as InstanceType<typeof OpenAI.BadRequestError>;
  }
  return expect.fail('the request should be refused');
}

describe('model-server: refusals say exactly what is wrong (official openai client)', () => {
  const ms = modelServerForSuite({ modelNames: [MODEL] });
  const client = () => new OpenAI({ baseURL: `${ms.base}/v1`, apiKey: 'unused', maxRetries: 0 });

  it('an image_url content part: only text is read, said as OpenAI says it, naming the part', async () => {
    const err = await refusal(client(), {}, [
      {
        role: 'user',
        content: [
          { type: 'text', text: '10 20' },
          { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
        ],
      },
    ]);
    expect(err.message).to.include('Invalid content type. image_url is only supported by certain models');
    expect(err.param).to.equal('messages[0].content[1].type');
    expect(err.message).to.not.match(/Invalid input\.?$/);
  });

  it('an unknown content part type is named with what is expected', async () => {
    const err = await refusal(client(), {}, [{ role: 'user', content: [{ type: 'video', video: {} }] }]);
    expect(err.message).to.include("Invalid 'messages[0].content[0].type': expected 'text', got \"video\"");
  });

  it('five stop strings: array too long, in OpenAI’s words (four are accepted)', async () => {
    const err = await refusal(client(), { stop: ['a', 'b', 'c', 'd', 'e'] });
    expect(err.message).to.include("Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length 5 instead.");
    expect(err.param).to.equal('stop');
    expect(err.code).to.equal('array_above_max_length');
    const ok = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: '10 20' }],
      stop: ['a', 'b', 'c', 'd'],
      max_tokens: 2,
    });
    expect(ok.choices[0]!.message.content).to.be.a('string');
  });

  it('modalities ["text", "audio"]: 400 unsupported (text only); ["text"] is accepted', async () => {
    const err = await refusal(client(), { modalities: ['text', 'audio'] });
    expect(err.message).to.include(`'modalities' does not support "audio"`).and.include('["text"]');
    expect(err.param).to.equal('modalities');
    expect(err.code).to.equal('unsupported_value');
    const audio = await refusal(client(), { audio: { voice: 'alloy', format: 'wav' } });
    expect(audio.param).to.equal('audio');
    const ok = await client().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: '10 20' }], modalities: ['text'], max_tokens: 2 });
    expect(ok.choices[0]!.message.content).to.be.a('string');
  });
});
