import http from 'node:http';
import { jsonOrUndefined } from '../support/json.js';
import { json, type FakeOpenAI } from './openai-upstream.js';
import { LocalServer, readBody } from './server.js';

/**
 * Routes FakeOpenAI does not have, installed with `fake.handle` (again after each `reset()`):
 * POST /v1/completions (JSON pretty-printed, so re-serialising is caught; streamed with usage
 * only when include_usage asks, `usage: null` on the other chunks then, as OpenAI does),
 * POST /v1/moderations (flags texts with "kill" in them), and a Jina-style POST /v1/rerank.
 * The last answer text sent is kept in `extraAnswers.last`.
 */
export const extraAnswers: { last?: string } = {};

interface CompletionBody {
  model?: string;
  prompt?: unknown;
  n?: number;
  echo?: boolean;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  max_tokens?: number;
}

function words(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

/** The fake's prompts as text (token ids written as `<ids 1 2 3>`). */
function promptsOf(prompt: unknown): string[] {
  if (typeof prompt === 'string') return [prompt];
  if (!Array.isArray(prompt)) return [];
  if (prompt.every((p) => typeof p === 'number')) return [`<ids ${prompt.join(' ')}>`];
  return prompt.map((p) => (typeof p === 'string' ? p : `<ids ${(p as number[]).join(' ')}>`));
}

/** What the fake completes a prompt with. */
export function fakeCompletionText(prompt: string): string {
  return ` and the upstream completes ${prompt.length} chars`;
}

function completions(res: http.ServerResponse, body: CompletionBody): void {
  const prompts = promptsOf(body.prompt);
  const n = body.n ?? 1;
  const id = 'cmpl-fake123';
  const created = 1_700_000_001;
  const model = body.model ?? 'unknown';
  const prompt_tokens = prompts.reduce((sum, p) => sum + words(p), 0);
  const completion_tokens = prompts.reduce((sum, p) => sum + words(fakeCompletionText(p)) * n, 0);
  const usage = { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
  if (!body.stream) {
    const choices = prompts.flatMap((p, pi) =>
      Array.from({ length: n }, (_, i) => ({ text: (body.echo ? p : '') + fakeCompletionText(p), index: pi * n + i, logprobs: null, finish_reason: 'stop' })),
    );
    const text = JSON.stringify({ id, object: 'text_completion', created, model, system_fingerprint: 'fp_fake', choices, usage }, null, 2);
    extraAnswers.last = text;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  const withUsage = body.stream_options?.include_usage === true;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let sent = '';
  const send = (choices: unknown[], extra: Record<string, unknown> = {}) => {
    const line = `data: ${JSON.stringify({ id, object: 'text_completion', created, model, system_fingerprint: 'fp_fake', choices, ...(withUsage ? { usage: null } : {}), ...extra })}\n\n`;
    sent += line;
    res.write(line);
  };
  prompts.forEach((p, pi) => {
    for (let i = 0; i < n; i++) {
      const index = pi * n + i;
      if (body.echo) send([{ text: p, index, logprobs: null, finish_reason: null }]);
      for (const piece of fakeCompletionText(p).split(/(?= )/)) send([{ text: piece, index, logprobs: null, finish_reason: null }]);
      send([{ text: '', index, logprobs: null, finish_reason: 'stop' }]);
    }
  });
  if (withUsage) send([], { usage });
  sent += 'data: [DONE]\n\n';
  extraAnswers.last = sent;
  res.end('data: [DONE]\n\n');
}

const CATEGORIES = [
  'harassment',
  'harassment/threatening',
  'hate',
  'hate/threatening',
  'illicit',
  'illicit/violent',
  'self-harm',
  'self-harm/intent',
  'self-harm/instructions',
  'sexual',
  'sexual/minors',
  'violence',
  'violence/graphic',
];

function moderations(res: http.ServerResponse, body: { model?: string; input?: unknown }): void {
  const inputs = typeof body.input === 'string' ? [body.input] : Array.isArray(body.input) ? (body.input as string[]) : [];
  const results = inputs.map((input) => {
    const violent = /\bkill\b/i.test(input);
    return {
      flagged: violent,
      categories: Object.fromEntries(CATEGORIES.map((c) => [c, violent && c === 'violence'])),
      category_scores: Object.fromEntries(CATEGORIES.map((c) => [c, violent && c === 'violence' ? 0.97 : 0.0001])),
      category_applied_input_types: Object.fromEntries(CATEGORIES.map((c) => [c, ['text']])),
    };
  });
  const text = JSON.stringify({ id: 'modr-fake123', model: body.model ?? 'unknown', results }, null, 2);
  extraAnswers.last = text;
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A deterministic score for a rerank fake: shared words of query and document. */
export function fakeRelevance(query: string, document: string): number {
  const asked = new Set(query.toLowerCase().split(/\W+/).filter(Boolean));
  const hits = document.toLowerCase().split(/\W+/).filter((w) => asked.has(w)).length;
  return Number((hits / (hits + 1)).toFixed(4));
}

function documentText(document: unknown): string {
  if (typeof document === 'string') return document;
  return String((document as { text?: unknown } | null)?.text ?? '');
}

interface RerankBody {
  model?: string;
  query?: string;
  documents?: unknown[];
  top_n?: number;
  return_documents?: boolean;
}

function ranked(body: RerankBody): Array<{ index: number; relevance_score: number; text: string }> {
  const docs = body.documents ?? [];
  return docs
    .map((d, index) => ({ index, relevance_score: fakeRelevance(body.query ?? '', documentText(d)), text: documentText(d) }))
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    .slice(0, body.top_n ?? docs.length);
}

/** Jina's rerank answer: `document: {text}` when asked, and usage in total_tokens. */
function jinaRerank(res: http.ServerResponse, body: RerankBody): void {
  const results = ranked(body).map((r) => ({ index: r.index, relevance_score: r.relevance_score, ...(body.return_documents ? { document: { text: r.text } } : {}) }));
  const tokens = words(body.query ?? '') * (body.documents?.length ?? 0) + (body.documents ?? []).reduce<number>((s, d) => s + words(documentText(d)), 0);
  json(res, 200, { model: body.model, usage: { total_tokens: tokens }, results });
}

export function installOpenAIExtras(fake: FakeOpenAI): void {
  fake.handle('POST /v1/completions', (_req, res, body) => completions(res, (body ?? {}) as CompletionBody));
  fake.handle('POST /v1/moderations', (_req, res, body) => moderations(res, (body ?? {}) as { model?: string; input?: unknown }));
  fake.handle('POST /v1/rerank', (_req, res, body) => jinaRerank(res, (body ?? {}) as RerankBody));
}

/** What the Cohere fake received. */
export interface CohereReceived {
  url: string;
  headers: http.IncomingHttpHeaders;
  body: RerankBody | undefined;
}

/**
 * A Cohere-style rerank upstream: Bearer key checked (401 `{"message": "invalid api token"}` as
 * Cohere answers), POST /v1/rerank in v1's shape (`document: {text}` when return_documents) and
 * POST /v2/rerank in v2's (no documents), both with `meta.billed_units.search_units`.
 */
export class FakeCohere extends LocalServer {
  readonly received: CohereReceived[] = [];
  /** Replaces the next answers when set. */
  override?: (res: http.ServerResponse, body: RerankBody) => void;

  constructor(readonly apiKey = 'co-secret-key-0123456789') {
    super();
  }

  last(): CohereReceived {
    const entry = this.received[this.received.length - 1];
    if (!entry) throw new Error('the Cohere fake received nothing');
    return entry;
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = jsonOrUndefined<RerankBody>((await readBody(req)).toString('utf8'));
    this.received.push({ url: req.url ?? '', headers: req.headers, body });
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) return json(res, 401, { message: 'invalid api token' });
    if (req.method !== 'POST' || !body) return json(res, 404, { message: `route not found: ${req.method} ${req.url}` });
    if (this.override) return this.override(res, body);
    const version = req.url === '/v2/rerank' ? 2 : req.url === '/v1/rerank' ? 1 : 0;
    if (!version) return json(res, 404, { message: `route not found: ${req.method} ${req.url}` });
    if (!body.query) return json(res, 400, { message: 'invalid request: query must not be empty' });
    const results = ranked(body).map((r) => ({
      index: r.index,
      relevance_score: r.relevance_score,
      ...(version === 1 && body.return_documents ? { document: { text: r.text } } : {}),
    }));
    json(res, 200, { id: 'co-rerank-0001', results, meta: { api_version: { version: String(version) }, billed_units: { search_units: 1 } } });
  }
}
