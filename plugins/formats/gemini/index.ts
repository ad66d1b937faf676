import {
  hiddenSlot,
  defineWireFormat,
  GatewayError,
  lossHeaders,
  printableLosses,
  modelAllowed,
  replyBytesOf,
  wasSentAsIs,
  type CallRoute,
  type CatalogModel,
  type FormatReply,
  type ChatRequest,
  type HandlerRoute,
  type ModelCatalogView,
  type RequestContext,
  type RouteInput,
} from '../../../core/index.js';
import { estimateInputTokens, forgetRequestLosses, relayedEvents } from '../anthropic-messages/index.js';
import { uncarriedParts } from './count.js';
import { createRequestAjv, toRequestError } from '../../validation/index.js';
import { Losses } from '../anthropic-messages/request.js';
import { errorBody, streamError } from './errors.js';
import { JsonArrayStream } from './json-array.js';
import { bareModel, batchEmbedContentsSchema, embedContentSchema, embedLosses, embedRoute } from './embed.js';
import { COUNT_TOKENS, GENERATE_CONTENT, useJsonNames } from './fields.js';
import { requestView, toCanonicalRequest } from './request.js';
import { toGenerateContentResponse } from './response.js';
import { generateContentSchema } from './schema.js';
import { generateContentEvents } from './stream.js';

const FORMAT = 'gemini';

type Json = Record<string, unknown>;

/** The model of a path segment (`gemini-2.5-flash`; a `models/` prefix, if any, is dropped). */
function modelOf(params: Readonly<Record<string, string>>): string {
  return bareModel(params.model ?? '');
}

/** Whether a streamGenerateContent call asked for server-sent events (`?alt=sse`). */
function wantsSse(query: RouteInput['query']): boolean {
  const alt = query.alt;
  return (Array.isArray(alt) ? alt[alt.length - 1] : alt) === 'sse';
}

/**
 * The translated request of a call, made once: in the validate hook (where the request context
 * is at hand for the losses) or, failing that, when the pipeline asks for the canonical body.
 * The names it lost are kept too: a back end that got the body as it is (same format) lost none.
 */
const translated = hiddenSlot<{ request: ChatRequest; losses: string[] }>();

function canonicalOf(body: Json, model: string, stream: boolean, ctx?: RequestContext): ChatRequest {
  let entry = translated.get(body);
  if (!entry) {
    const result = toCanonicalRequest(body, model, stream);
    entry = { request: result.value, losses: result.losses };
    translated.set(body, entry);
    if (ctx) for (const name of result.losses) Losses.of(ctx).add(name);
  }
  return entry.request;
}

/** A JSON answer's bytes as a one-element JSON array (streamGenerateContent without `alt=sse`). */
function inArray(bytes: Uint8Array | string): Uint8Array {
  const inner = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
  return Buffer.concat([Buffer.from('['), inner, Buffer.from(']')]);
}

/**
 * `:generateContent` (JSON), or `:streamGenerateContent`: server-sent events with `?alt=sse`,
 * otherwise (Google's default) a JSON array of responses, here one whole response.
 */
function generateRoute(method: 'generateContent' | 'streamGenerateContent', stem: string): CallRoute<'chat'> {
  const streaming = method === 'streamGenerateContent';
  return {
    kind: 'call',
    method: 'POST',
    // `*model` then a literal `:generateContent` (or `%3AgenerateContent`): the model name may
    // hold dots, dashes and slashes (`meta-llama/Llama-3.1-8B-Instruct`), as the SDK sends it.
    path: `${stem}${method}`,
    operation: 'chat',
    outputLimitField: 'generationConfig.maxOutputTokens',
    schema: generateContentSchema,
    parse({ params, body }) {
      // Before validation and translation: Google takes `system_instruction` as `systemInstruction`.
      const rewritten = useJsonNames(body, GENERATE_CONTENT);
      // Streamed either way: as server-sent events (`?alt=sse`) or as a JSON array (see JsonArrayStream).
      return { model: modelOf(params), stream: streaming, wantsStreamUsage: streaming, rewritten };
    },
    toCanonical(body, { params }) {
      return canonicalOf(body, modelOf(params), streaming);
    },
    render(response, call, ctx) {
      // A stream without `?alt=sse`: Google's JSON array, its items the events' data.
      const asArray = (events: AsyncIterable<string | Uint8Array>): FormatReply => {
        if (wantsSse(ctx.query)) return { headers: lossHeaders(ctx), stream: events };
        const array = new JsonArrayStream();
        // Not buffered on its way (nginx), as an event stream is not.
        const headers = { ...lossHeaders(ctx), 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };
        return { headers, stream: array.of(events), streamError: (view) => array.error(view) };
      };
      if (wasSentAsIs(ctx, FORMAT)) {
        // The gemini back end got the body as the client sent it: its answer goes back as it came.
        forgetRequestLosses(ctx, translated.get(call.body)?.losses);
        if (response.kind === 'stream') return asArray(relayedEvents(response.chunks, FORMAT));
        const bytes = replyBytesOf(response, FORMAT);
        if (bytes) return { status: 200, headers: { ...lossHeaders(ctx), 'content-type': 'application/json' }, body: streaming ? inArray(bytes) : bytes };
      }
      const losses = Losses.of(ctx);
      // The provider type of the back end that answered: its signatures vouch only for it.
      const view = { ...requestView(call.body), maker: ctx.target?.provider.type };
      if (response.kind === 'stream') return asArray(generateContentEvents(response.chunks, { view, losses }));
      const answer = toGenerateContentResponse(response.body, view);
      for (const name of answer.losses) losses.add(name);
      return { status: 200, headers: lossHeaders(ctx), body: streaming ? [answer.value] : answer.value };
    },
  };
}

/**
 * Where a model's methods are: under Google's API versions `v1beta` (the SDKs' default) and `v1`
 * (`@google/genai` with `apiVersion: 'v1'`), the colon as it is or percent-encoded (`%3A`), as
 * some HTTP clients send it; Google accepts every spelling.
 */
const STEMS = ['v1beta', 'v1'].flatMap((version) => ['\\:', '%3A'].map((colon) => `/${version}/models/*model${colon}`));
const callRoutes = (['generateContent', 'streamGenerateContent'] as const).flatMap((method) => STEMS.map((stem) => generateRoute(method, stem)));
const embedRoutes = (['embedContent', 'batchEmbedContents'] as const).flatMap((method) => STEMS.map((stem) => embedRoute(method, stem)));

/**
 * `:countTokens`: `{"totalTokens": n}` for `{contents, …}` or `{generateContentRequest: {…}}`,
 * estimated as anthropic-messages' count_tokens does (the metering tokenizer over the translated
 * request, plus a fixed count per image).
 */
function countTokensRoute(stem: string): HandlerRoute {
  const validate = createRequestAjv().compile(generateContentSchema);
  return {
    kind: 'handler',
    method: 'POST',
    path: `${stem}countTokens`,
    readsBody: true,
    async handle(ctx, { body, params }, { models, key }) {
      const model = modelOf(params);
      ctx.model = model;
      useJsonNames(body, COUNT_TOKENS);
      const inner = body.generateContentRequest !== null && typeof body.generateContentRequest === 'object' ? (body.generateContentRequest as Json) : body;
      if (!validate(inner)) throw toRequestError(validate.errors ?? [], inner);
      if (!models.list().some((m) => m.id === model)) throw new GatewayError('model_not_found', { params: { model }, param: 'model' });
      if (!modelAllowed(key?.models, model)) throw new GatewayError('model_not_allowed', { params: { model }, param: 'model' });
      // What the translation has no place for is estimated from the body, not named as lost (see uncarriedParts).
      const result = toCanonicalRequest(inner, model, false);
      return { body: { totalTokens: (await estimateInputTokens(result.value)) + uncarriedParts(inner) } };
    },
  };
}

/** What a model's back ends can do, as the methods Google lists for it. */
function methodsOf(m: CatalogModel, models: ModelCatalogView): string[] {
  const methods: string[] = [];
  if (models.candidates(m.id, 'chat').length > 0) methods.push('generateContent', 'streamGenerateContent', 'countTokens');
  if (models.candidates(m.id, 'embeddings').length > 0) methods.push('embedContent', 'batchEmbedContents');
  return methods;
}

function modelEntry(m: CatalogModel, models: ModelCatalogView): Json {
  return {
    name: `models/${m.id}`,
    baseModelId: m.id,
    version: '001',
    displayName: m.id,
    description: `Served by ${m.ownedBy} through Switchyard.`,
    supportedGenerationMethods: methodsOf(m, models),
  };
}

/** Models on a page of the listing when the client sets no pageSize (or 0), and at most (Google's). */
const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 1000;
/** What a page token says before the id of the last model of the page before. */
const TOKEN_PREFIX = 'after:';

/** A query parameter by its JSON name, else its proto name (`pageSize`, `page_size`); the last when given twice. */
function queryParam(query: RouteInput['query'], json: string, proto: string): string | undefined {
  const value = query[json] ?? query[proto];
  return Array.isArray(value) ? value[value.length - 1] : value;
}

/** The page token that continues a listing after the model `id`: opaque to clients (base64url). */
function pageTokenAfter(id: string): string {
  return Buffer.from(`${TOKEN_PREFIX}${id}`, 'utf8').toString('base64url');
}

/**
 * One page of the models a key may use, as Google's ListModels pages them: `pageSize` models
 * (none or 0: 50; above 1000: 1000) from where `pageToken` says, and `nextPageToken` when more
 * follow. A token names the last model of the page before, as the messages format's listing
 * continues `after_id`; one this gateway did not give out (or whose model is gone) is a 400.
 */
export function modelListPage<M extends { id: string }>(list: readonly M[], query: RouteInput['query']): { page: readonly M[]; nextPageToken?: string } {
  const sizeText = queryParam(query, 'pageSize', 'page_size');
  const asked = sizeText === undefined || sizeText === '' ? 0 : Number(sizeText);
  if (!Number.isInteger(asked) || asked < 0) {
    throw new GatewayError('invalid_value', { param: 'pageSize', params: { detail: `expected a whole number of models, 0 or more (0: ${DEFAULT_PAGE_SIZE}; at most ${MAX_PAGE_SIZE} are given).` } });
  }
  const size = asked === 0 ? DEFAULT_PAGE_SIZE : Math.min(asked, MAX_PAGE_SIZE);
  const token = queryParam(query, 'pageToken', 'page_token');
  let start = 0;
  if (token !== undefined && token !== '') {
    const said = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, 'base64url').toString('utf8') : '';
    const after = said.startsWith(TOKEN_PREFIX) ? list.findIndex((m) => m.id === said.slice(TOKEN_PREFIX.length)) : -1;
    if (after < 0) {
      throw new GatewayError('invalid_value', { param: 'pageToken', params: { detail: 'not a page token this listing gave out; list again from the first page (no pageToken).' } });
    }
    start = after + 1;
  }
  const page = list.slice(start, start + size);
  return start + size < list.length && page.length > 0 ? { page, nextPageToken: pageTokenAfter(page[page.length - 1]!.id) } : { page };
}

/**
 * Whether a request under `/v1/models` is a Gemini client's (`@google/genai` set to Google's `v1`
 * API sends its key and its client name in headers of Google's own): the OpenAI listing's path.
 */
const fromGoogleClient = (headers: Readonly<Record<string, string | string[] | undefined>>): boolean =>
  headers['x-goog-api-key'] !== undefined || headers['x-goog-api-client'] !== undefined;

/** The model listing at `path` (`/v1beta/models`, or `/v1/models` for a Gemini client). */
function listModels(path: string, onlyIf?: HandlerRoute['onlyIf']): HandlerRoute {
  return {
    kind: 'handler',
    method: 'GET',
    path,
    onlyIf,
    handle(_ctx, { query }, { models, key }) {
      const { page, nextPageToken } = modelListPage(models.list().filter((m) => modelAllowed(key?.models, m.id)), query);
      const body: Json = { models: page.map((m) => modelEntry(m, models)) };
      if (nextPageToken !== undefined) body.nextPageToken = nextPageToken;
      return { body };
    },
  };
}

/** One model at `path`/{model} (see listModels). */
function getModel(path: string, onlyIf?: HandlerRoute['onlyIf']): HandlerRoute {
  return {
    kind: 'handler',
    method: 'GET',
    path: `${path}/*model`,
    onlyIf,
    handle(ctx, { params }, { models, key }) {
      const id = modelOf(params);
      ctx.model = id;
      const found = models.list().find((m) => m.id === id);
      if (!found || !modelAllowed(key?.models, id)) throw new GatewayError('model_not_found', { params: { model: id }, param: 'model' });
      return { body: modelEntry(found, models) };
    },
  };
}

const modelRoutes = [listModels('/v1beta/models'), getModel('/v1beta/models'), listModels('/v1/models', fromGoogleClient), getModel('/v1/models', fromGoogleClient)];

/**
 * generateContent and streamGenerateContent in Google's Gemini wire format (v1beta), and the
 * model listing, translated through the canonical chat form so that any chat back end answers.
 */
export default defineWireFormat({
  name: FORMAT,
  version: '0.1.0',
  description: 'generateContent / streamGenerateContent in the Gemini wire format, over any chat back end.',
  id: FORMAT,
  routes: [...callRoutes, ...embedRoutes, ...STEMS.map(countTokensRoute), ...modelRoutes],
  // Besides Bearer: what Google's clients send, the spec's header, and `?key=` (redacted from logs).
  keyHeaders: ['x-goog-api-key', 'x-provider-api-key'],
  keyQuery: ['key'],
  renderError: errorBody,
  renderStreamError: streamError,
  // Google never sends an SSE comment, and its older SDK (@google/generative-ai, which
  // LangChain's Gemini chat model uses) fails on one: a silent Gemini stream gets no keep-alive.
  streamComments: false,
  apply(api) {
    // Stage 10: after the validation plugin's tap, so only a valid body is translated.
    api.hooks.validate.tap({ name: FORMAT, stage: 10 }, (ctx, call) => {
      if (call.format !== FORMAT) return;
      if (call.schema === generateContentSchema) canonicalOf(call.body, call.model, call.stream, ctx);
      else if (call.schema === embedContentSchema || call.schema === batchEmbedContentsSchema) {
        embedLosses(call.body, call.schema === batchEmbedContentsSchema, Losses.of(ctx));
      }
    });
    api.hooks.onResponse.tap(FORMAT, (ctx) => {
      if (ctx.format === FORMAT && ctx.losses?.length) {
        api.logger.info('translation losses', { requestId: ctx.id, format: FORMAT, losses: printableLosses(ctx.losses) });
      }
    });
  },
});
