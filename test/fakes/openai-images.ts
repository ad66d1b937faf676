import http from 'node:http';
import { invalidApiKey } from './openai-upstream.js';
import { FakeServer, json, readBody } from './server.js';

/** What the fake received, one entry per request. */
export interface ImagesReceived {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** The exact bytes of the body. */
  raw: Buffer;
  /** A JSON body, parsed. */
  json?: Record<string, unknown>;
  /** A multipart body, parsed by the platform's own FormData reader (fields and files). */
  form?: FormData;
}

export type ImagesScript = (received: ImagesReceived) => { status?: number; json: unknown } | undefined;

/** A real PNG of 1x1 pixel (colour ff8000), for the fake's answers. */
export const FAKE_PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP438AAAAQBAYDFKhhdAAAAAElFTkSuQmCC';

/**
 * OpenAI's images API for tests: POST /v1/images/generations (JSON) and POST /v1/images/edits
 * (multipart/form-data, as the real API takes it). It checks the Bearer key as OpenAI does (401
 * `invalid_api_key` in OpenAI's error shape), records every request with its raw bytes (the
 * FakeOpenAI class keeps only a JSON body, and an edit is a form), and answers `n` images:
 * `b64_json` unless `response_format: url`, with `usage` in tokens as the GPT image models report
 * it. A test scripts another answer with `script()`.
 */
export class FakeOpenAIImages extends FakeServer<ImagesReceived, ImagesScript> {
  constructor(apiKey = 'sk-images-upstream-secret-0123456789') {
    super(apiKey);
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const entry: ImagesReceived = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, raw };
    const type = String(req.headers['content-type'] ?? '');
    if (type.startsWith('application/json')) {
      try {
        entry.json = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
      } catch {
        // recorded raw
      }
    } else if (type.startsWith('multipart/form-data')) {
      entry.form = await new Response(raw, { headers: { 'content-type': type } }).formData();
    }
    this.received.push(entry);

    if (req.headers.authorization !== `Bearer ${this.apiKey}`) return json(res, 401, invalidApiKey(req.headers.authorization));
    const scripted = this.scripted?.(entry);
    if (scripted) return json(res, scripted.status ?? 200, scripted.json);
    const route = `${req.method} ${(req.url ?? '').split('?')[0]}`;
    if (route === 'POST /v1/images/generations' && entry.json) return this.images(res, entry.json);
    if (route === 'POST /v1/images/edits' && entry.form) {
      if (!entry.form.get('image') && entry.form.getAll('image[]').length === 0) {
        return json(res, 400, { error: { message: "Missing required parameter: 'image'.", type: 'invalid_request_error', param: 'image', code: 'missing_required_parameter' } });
      }
      const fields: Record<string, unknown> = {};
      for (const [name, value] of entry.form.entries()) if (typeof value === 'string') fields[name] = value;
      return this.images(res, { ...fields, n: fields.n === undefined ? undefined : Number(fields.n) });
    }
    return json(res, 404, { error: { message: `Invalid URL (${route})`, type: 'invalid_request_error', param: null, code: null } });
  }

  private images(res: http.ServerResponse, body: Record<string, unknown>): void {
    // As OpenAI answers: GPT image models always give base64 and refuse the field.
    if (/gpt-image/.test(String(body.model)) && body.response_format !== undefined) {
      return json(res, 400, { error: { message: "Unknown parameter: 'response_format'.", type: 'invalid_request_error', param: 'response_format', code: 'unknown_parameter' } });
    }
    const n = typeof body.n === 'number' ? body.n : 1;
    const data = Array.from({ length: n }, (_, i) =>
      body.response_format === 'url'
        ? { url: `https://images.fake.example/${i}.png`, revised_prompt: `revised: ${String(body.prompt)}` }
        : { b64_json: FAKE_PNG_B64, revised_prompt: `revised: ${String(body.prompt)}` },
    );
    json(res, 200, {
      created: 1_700_000_123,
      data,
      // What GPT image models say besides the images.
      ...(typeof body.size === 'string' ? { size: body.size, quality: body.quality ?? 'auto', background: body.background ?? 'auto', output_format: 'png' } : {}),
      usage: { input_tokens: 12, output_tokens: 100 * n, total_tokens: 12 + 100 * n, input_tokens_details: { text_tokens: 12, image_tokens: 0 } },
    });
  }
}
