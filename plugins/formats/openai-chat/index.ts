import {
  defineWireFormat,
  GatewayError,
  lossHeaders,
  mergeHeaders,
  modelAllowed,
  sseData,
  replyBytesOf,
  dropUpstreamBytes,
  type CallRoute,
  type ErrorView,
  type HandlerRoute,
  type ChatRequest,
  toolCallsAsFunctionCall,
  usesLegacyFunctions,
} from '../../../core/index.js';
import { chatCompletionsSchema } from './schema.js';
import { embeddingRoutes } from './embeddings.js';
import { fingerprintOf, FORMAT, FUNCTION_CALLS_AFTER_THE_FIRST, openAIEvents, openAIShaped, signaturesTagged } from './events.js';
import { LossList } from './responses/request.js';
import { audioRoutes } from './audio.js';
import { completions } from './completions.js';
import { completionBridge } from './completion-bridge.js';
import { moderations, moderationDefaults, DEFAULT_MODERATION_MODEL } from './moderations.js';
import { rerank } from './rerank.js';
import { imageRoutes } from './images.js';
import { applyResponses, responsesRoutes } from './responses/routes.js';

const JSON_TYPE = { 'content-type': 'application/json' };

/** The provider type of back ends that speak chat completions themselves. */
const COMPATIBLE_TYPE = 'openai';


function errorBody(view: ErrorView) {
  return { error: { message: view.message, type: view.type, param: view.param, code: view.code } };
}


const chatCompletions: CallRoute<'chat'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/chat/completions',
  operation: 'chat',
  schema: chatCompletionsSchema,
  relaysOpeningChunk: true,
  parse({ body }) {
    const options = body.stream_options as { include_usage?: unknown } | null | undefined;
    return {
      model: typeof body.model === 'string' ? body.model : '',
      stream: body.stream === true,
      wantsStreamUsage: body.stream === true && options?.include_usage === true,
    };
  },
  render(response, call, ctx) {
    // A client that asked with the older `functions` gets any tool call back as `function_call`,
    // whoever answered (a translated answer has tool calls; so may a compatible server's).
    const legacy = usesLegacyFunctions(call.canonical as ChatRequest);
    // Reasoning signatures go out tagged with the type of back end that made them (see signaturesTagged).
    const maker = ctx.target?.provider.type;
    // Answers of another format's back end get the fields OpenAI gives every answer (see
    // openAIShaped); an OpenAI-compatible one's answers are its own (a chunk the gateway adds to
    // its stream, a usage count, gets no made-up fingerprint beside the back end's).
    const fingerprint = maker !== undefined && maker !== COMPATIBLE_TYPE && ctx.target ? fingerprintOf(maker, ctx.target.model) : undefined;
    if (response.kind === 'stream') return { headers: lossHeaders(ctx), stream: openAIEvents(response.chunks, call.wantsStreamUsage, legacy ? ctx : undefined, maker, fingerprint) };
    const reshaped = legacy ? toolCallsAsFunctionCall(response.body) : 'unchanged';
    if (reshaped === 'dropped') LossList.of(ctx).add(FUNCTION_CALLS_AFTER_THE_FIRST);
    // What a back end of another kind could not take (a chat client's `seed` at a Claude back end, say).
    const headers = lossHeaders(ctx);
    // A back end of this format's answer goes as it came; another's has its signatures tagged.
    const bytes = reshaped === 'unchanged' ? replyBytesOf(response, FORMAT) : undefined;
    if (bytes) return { status: 200, headers: mergeHeaders(headers, JSON_TYPE), body: bytes };
    if (maker !== undefined && signaturesTagged(response.body.choices, 'message', maker)) dropUpstreamBytes(response.body);
    if (fingerprint !== undefined) openAIShaped(response.body as never, 'message', fingerprint);
    return { status: 200, headers, body: response.body };
  },
};

const listModels: HandlerRoute = {
  kind: 'handler',
  method: 'GET',
  path: '/v1/models',
  handle(_ctx, _input, { models, key }) {
    const data = models
      .list()
      .filter((m) => modelAllowed(key?.models, m.id))
      .map((m) => ({ id: m.id, object: 'model', created: m.created, owned_by: m.ownedBy }));
    return { body: { object: 'list', data } };
  },
};

const getModel: HandlerRoute = {
  kind: 'handler',
  method: 'GET',
  // A wildcard: ids such as `meta-llama/Llama-3.1-8B` are fetched with their slash as it is, or encoded.
  path: '/v1/models/*model',
  handle(_ctx, { params }, { models, key }) {
    const id = params.model ?? '';
    const found = models.list().find((m) => m.id === id);
    if (!found || !modelAllowed(key?.models, id)) throw new GatewayError('model_not_found', { params: { model: id }, param: 'model' });
    return { body: { id: found.id, object: 'model', created: found.created, owned_by: found.ownedBy } };
  },
};

/** POST /v1/chat/completions (streamed and not) and the model listing, in OpenAI's wire format. */
export default defineWireFormat({
  name: FORMAT,
  version: '0.1.0',
  description: 'Chat completions and the model list in the OpenAI wire format.',
  id: FORMAT,
  routes: [chatCompletions, ...embeddingRoutes, ...audioRoutes, completions, moderations, rerank, ...imageRoutes, ...responsesRoutes, listModels, getModel],
  renderError: errorBody,
  renderStreamError: (view) => sseData(JSON.stringify(errorBody(view))),
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      // The model POST /v1/moderations routes to when the body names none.
      moderationModel: { type: 'string', minLength: 1, default: DEFAULT_MODERATION_MODEL },
    },
  },
  apply(api) {
    moderationDefaults.model = (api.options as { moderationModel?: string }).moderationModel ?? DEFAULT_MODERATION_MODEL;
    // Chat back ends without a completion handler serve POST /v1/completions through chat.
    api.registerBridge(completionBridge);
    // Chat back ends without their own serve POST /v1/responses and /v1/responses/compact through chat.
    applyResponses(api);
  },
});
