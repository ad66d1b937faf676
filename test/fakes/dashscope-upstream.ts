import http from 'node:http';
import { jsonOrUndefined } from '../support/json.js';
import { FakeServer, json, readBody } from './server.js';

type Json = Record<string, any>;

export interface DashScopeReceived {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Json | undefined;
}

export type DashScopeScript = (body: Json, received: DashScopeReceived) => { status?: number; json: unknown } | undefined;

export const GENERATION_PATH = '/api/v1/services/aigc/multimodal-generation/generation';

/** DashScope's error body: `{request_id, code, message}`. */
export function dashscopeError(code: string, message: string): Json {
  return { request_id: 'fake-request-0000-1111', code, message };
}

/**
 * Alibaba Cloud DashScope's multimodal generation endpoint for tests (qwen-image and
 * qwen-image-edit), in its real shapes:
 *
 * - auth: `Authorization: Bearer <key>`; anything else is 401 `{code: 'InvalidApiKey', message:
 *   'Invalid API-key provided.', request_id}`;
 * - request: `{model, input: {messages: [{role, content: [{image}…, {text}]}]}, parameters}`; a
 *   malformed one is 400 `InvalidParameter` (no messages, no text; an edit model without image;
 *   a size not written `W*H`);
 * - answer: `{output: {choices: [{finish_reason: 'stop', message: {role: 'assistant', content:
 *   [{image: url}…]}}], task_metric}, usage: {width, height, image_count}, request_id}`, with
 *   `parameters.n` images (default 1) at URLs on its own host.
 *
 * Every request is recorded; `script()` answers differently (errors, odd shapes).
 */
export class FakeDashScope extends FakeServer<DashScopeReceived, DashScopeScript> {
  constructor(apiKey = 'sk-dashscope-upstream-secret-0123456789') {
    super(apiKey);
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = jsonOrUndefined<Json>((await readBody(req)).toString('utf8'));
    const entry: DashScopeReceived = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
    this.received.push(entry);

    if (req.headers.authorization !== `Bearer ${this.apiKey}`) return json(res, 401, dashscopeError('InvalidApiKey', 'Invalid API-key provided.'));
    if (req.method !== 'POST' || req.url !== GENERATION_PATH) return json(res, 404, dashscopeError('NotFound', 'Not found!'));
    if (!body) return json(res, 400, dashscopeError('InvalidParameter', 'The request body is not valid JSON.'));
    const scripted = this.scripted?.(body, entry);
    if (scripted) return json(res, scripted.status ?? 200, scripted.json);

    const content = (body.input?.messages?.[0]?.content as Json[] | undefined) ?? [];
    const text = content.find((c) => typeof c.text === 'string');
    if (!text) return json(res, 400, dashscopeError('InvalidParameter', 'Input should contain text.'));
    const images = content.filter((c) => typeof c.image === 'string');
    if (String(body.model).includes('edit') && images.length === 0) return json(res, 400, dashscopeError('InvalidParameter', 'The image editing model needs an input image.'));
    const size = body.parameters?.size as string | undefined;
    if (size !== undefined && !/^\d+\*\d+$/.test(size)) return json(res, 400, dashscopeError('InvalidParameter', `The size ${size} is not valid; use width*height.`));
    const n = (body.parameters?.n as number | undefined) ?? 1;
    const [width, height] = (size ?? '1328*1328').split('*').map(Number);
    return json(res, 200, {
      output: {
        choices: [
          {
            finish_reason: 'stop',
            message: { role: 'assistant', content: Array.from({ length: n }, (_, i) => ({ image: `${this.url}/results/${this.received.length}-${i}.png?Expires=1767927258&Signature=abc` })) },
          },
        ],
        task_metric: { TOTAL: n, SUCCEEDED: n, FAILED: 0 },
      },
      usage: { width, height, image_count: n },
      request_id: `fake-request-${this.received.length}`,
    });
  }
}
