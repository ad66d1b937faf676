import { GatewayError, type CallRoute, type FormatReply, type JsonSchema } from '../../../core/index.js';

/**
 * POST /v1/rerank: score documents against a query (the Cohere/Jina-style rerank API the
 * spec lists beside OpenAI's endpoints).
 *
 * The canonical result of the `rerank` operation is the spec's rerank result:
 * `{id, results: [{index, relevance_score, document?}], meta}`, `document` always an object
 * (`{text}` for a string document; an object document as it was sent). Whatever the back end
 * did, the reply is put in order here: highest score first, at most `top_n` results, and
 * `document` only when `return_documents` is true (taken from the request when the back end
 * left it out).
 */

export interface RerankResult {
  index: number;
  relevance_score: number;
  document?: Record<string, unknown>;
  [extra: string]: unknown;
}

export interface RerankResponse {
  id: string;
  results: RerankResult[];
  meta: Record<string, unknown>;
  [extra: string]: unknown;
}

export const rerankSchema: JsonSchema = {
  type: 'object',
  required: ['model', 'query', 'documents'],
  properties: {
    model: { type: 'string', minLength: 1 },
    query: { type: 'string', minLength: 1 },
    documents: {
      type: 'array',
      minItems: 1,
      items: { type: ['string', 'object'] },
    },
    top_n: { type: 'integer', minimum: 1 },
    return_documents: { type: 'boolean' },
  },
};

/** A document as the result carries it: `{text}` for a string, an object as it is. */
export function documentObject(document: unknown): Record<string, unknown> | undefined {
  if (typeof document === 'string') return { text: document };
  if (document !== null && typeof document === 'object' && !Array.isArray(document)) return document as Record<string, unknown>;
  return undefined;
}

/** The result put in order: by score, cut to top_n, documents only when asked for. */
export function finishRerank(result: RerankResponse, body: Record<string, unknown>): RerankResponse {
  const documents = Array.isArray(body.documents) ? (body.documents as unknown[]) : [];
  const topN = typeof body.top_n === 'number' ? body.top_n : undefined;
  const withDocuments = body.return_documents === true;
  const ordered = result.results
    .map((r, position) => ({ r, position }))
    .sort((a, b) => b.r.relevance_score - a.r.relevance_score || a.position - b.position)
    .map(({ r }) => r)
    .slice(0, topN);
  const results = ordered.map((r) => {
    const { document, ...rest } = r;
    if (!withDocuments) return rest as RerankResult;
    // The document as the client sent it (an object with all its fields; a string as `{text}`),
    // whatever the back end echoes of it (some give the text alone).
    return { ...rest, document: documentObject(documents[r.index]) ?? documentObject(document) ?? {} };
  });
  return { ...result, results };
}

export const rerank: CallRoute<'rerank'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/rerank',
  operation: 'rerank',
  schema: rerankSchema,
  parse({ body }) {
    return { model: typeof body.model === 'string' ? body.model : '', stream: false };
  },
  render(response, call): FormatReply {
    if (response.kind === 'stream') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed a rerank result' } });
    return { status: 200, body: finishRerank(response.body as RerankResponse, call.body) };
  },
};
