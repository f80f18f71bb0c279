import type http from 'node:http';
import { sendJson } from '../../service-kit/src/chain.js';

/** An error answered in OpenAI's shape: `{"error":{"message","type","param","code"}}`. */
export class OpenAIError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
    this.name = 'OpenAIError';
  }

  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }

  static invalid(message: string, param: string | null = null, code: string | null = null): OpenAIError {
    return new OpenAIError(400, message, 'invalid_request_error', param, code);
  }
}

export function sendOpenAIError(res: http.ServerResponse, err: OpenAIError): void {
  if (err.status === 429 || err.status === 503) res.setHeader('Retry-After', '1');
  sendJson(res, err.body(), err.status);
}
