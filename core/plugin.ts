import type { SchemaObject } from 'ajv';
import type Koa from 'koa';
import type { Logger } from 'winston';
import type { GatewayConfig, ProviderConfig } from '../config/types.js';
import type { Call, CallerKey, RequestContext } from './context.js';
import type { ErrorCode, ErrorView, GatewayError, GatewayErrorOptions } from './errors.js';
import type { PluginHooks } from './hooks.js';
import type { Abortable, AbortWatch } from './attempt.js';
import type { Stores } from './store/types.js';
import type { Pool } from 'undici';
import type { PoolOptions } from './http/pools.js';
import type { CanonicalBody, OperationId, UpstreamRequest, UpstreamResponse } from './operations.js';
import type { VideoBackend } from './video.js';

export type JsonSchema = SchemaObject;

// ---------------------------------------------------------------------------------------------
// Plugins
// ---------------------------------------------------------------------------------------------

/** What every plugin is: a name, a version, what it needs, the shape of its options, and apply(). */
export interface GatewayPlugin<O = Record<string, unknown>> {
  readonly name: string;
  readonly version: string;
  readonly description?: string;
  /** Plugins that must appear earlier in `plugins:`. */
  readonly dependencies?: readonly string[];
  /** JSON Schema for `options`; checked (and defaults filled) before apply() is called. */
  readonly optionsSchema?: JsonSchema;
  apply(api: PluginApi<O>): void | Promise<void>;
}

/** What apply() receives. Hooks are tap-only; the registries are read-only views. */
export interface PluginApi<O = Record<string, unknown>> {
  readonly name: string;
  readonly options: Readonly<O>;
  /** The whole validated configuration, with ${VAR}s substituted. Do not log it: it has secrets. */
  readonly config: Readonly<GatewayConfig>;
  readonly hooks: PluginHooks;
  readonly logger: Logger;
  readonly providers: ProviderRegistryView;
  readonly models: ModelCatalogView;
  /** The wire formats registered so far (all of them by the time the `setup` hook runs). */
  readonly formats: FormatRegistryView;
  /** Keys, usage ledger, request log and counters. Open them only from hooks (setup onwards), not in apply(). */
  readonly stores: Stores;
  /** Add a provider type that `providers[].type` can name. Call it inside apply(). */
  registerProviderType(definition: ProviderType): void;
  /** Add a wire format. Call it inside apply(): routes are mounted once every plugin is applied. */
  registerFormat(definition: WireFormat): void;
  /**
   * Let back ends that lack operation `from` serve it through their `to` operation (responses
   * through chat, say). Call it inside apply(): bridges are applied once every provider exists.
   */
  registerBridge(bridge: OperationBridge<any, any>): void;
  /** A GatewayError with a code from the table (for plugins that cannot import the class). */
  error(code: ErrorCode, options?: GatewayErrorOptions): GatewayError;
}

export function definePlugin<O = Record<string, unknown>>(plugin: GatewayPlugin<O>): GatewayPlugin<O> {
  return plugin;
}

// ---------------------------------------------------------------------------------------------
// Providers
// ---------------------------------------------------------------------------------------------

export interface ProviderCallContext {
  readonly requestId: string;
  /** Aborted when the client leaves or the gateway gives up: pass it to every upstream call. */
  readonly signal: AbortSignal;
  /**
   * The same news as `signal` without an AbortSignal (made only when `signal` is read): core's
   * upstream helpers (`postJson`, `readJson`, `translateEvents`, `sendUpstream`) take it in
   * place of the signal. Set by the pipeline; absent in contexts made elsewhere.
   */
  readonly abort?: AbortWatch;
  readonly logger: Logger;
  readonly request: RequestContext;
}

export type OperationHandler<O extends OperationId> = (
  request: UpstreamRequest<O>,
  context: ProviderCallContext,
) => Promise<UpstreamResponse<O>>;

export type OperationHandlers = { [O in OperationId]?: OperationHandler<O> };

/** A configured back end: one entry of `providers:`. */
export interface ProviderInstance {
  readonly id: string;
  readonly type: string;
  /**
   * Model names this back end serves under their own names (usually `providers[].models`; a
   * provider may add names it knows). Read once, when the gateway starts.
   */
  readonly models: readonly string[];
  readonly operations: OperationHandlers;
  /**
   * A video back end (core/video.ts): polled by the task engine. A provider that has one also
   * serves the `video` operation, usually with `videoOperation(video)`.
   */
  readonly video?: VideoBackend;
  /** Release pools and timers at shutdown. */
  close?(): Promise<void>;
}

export interface ProviderEnv {
  readonly logger: Logger;
  readonly config: Readonly<GatewayConfig>;
  /** Shared keep-alive connection pools, one per upstream origin. */
  pool(origin: string, options?: PoolOptions): Pool;
  /**
   * The pool for `origin` sized and timed by a `providers:` entry: its `connections`, and its
   * `timeouts` (connect, first byte as the headers timeout, idle as the body timeout).
   */
  poolFor(origin: string, config: ProviderConfig & { connections?: number }): Pool;
}

/** A kind of back end (`openai`, `mock`, a third party's). Operators make instances of it. */
export interface ProviderType<C extends ProviderConfig = ProviderConfig> {
  readonly type: string;
  /**
   * JSON Schema for one `providers[]` entry of this type. `id`, `type` and `models` are always
   * allowed; list every other field here (unknown fields are refused at start-up).
   */
  readonly configSchema?: JsonSchema;
  create(config: C, env: ProviderEnv): ProviderInstance | Promise<ProviderInstance>;
}

export interface ProviderPluginDefinition<C extends ProviderConfig, O> extends ProviderType<C> {
  readonly name: string;
  readonly version: string;
  readonly description?: string;
  readonly dependencies?: readonly string[];
  readonly optionsSchema?: JsonSchema;
  /** Optional extra wiring beyond registering the type. */
  apply?(api: PluginApi<O>): void | Promise<void>;
}

/** A plugin that registers one provider type. */
export function defineProvider<C extends ProviderConfig = ProviderConfig, O = Record<string, unknown>>(
  definition: ProviderPluginDefinition<C, O>,
): GatewayPlugin<O> {
  const { name, version, description, dependencies, optionsSchema, apply, type, configSchema, create } = definition;
  return {
    name,
    version,
    description,
    dependencies,
    optionsSchema,
    async apply(api) {
      api.registerProviderType({ type, configSchema, create } as ProviderType);
      await apply?.(api);
    },
  };
}

/**
 * Serves one operation through another, for back ends that only have the other: a provider
 * without `from` but with `to` gets `wrap(its to-handler)` as its `from` handler, so routing,
 * retries and metering see an ordinary `from` back end. The first bridge registered for a
 * `from` wins; a provider's own handler always wins over a bridge.
 */
export interface OperationBridge<F extends OperationId = OperationId, T extends OperationId = OperationId> {
  readonly from: F;
  readonly to: T;
  wrap(handler: OperationHandler<T>, provider: ProviderInstance): OperationHandler<F>;
}

export function defineBridge<F extends OperationId, T extends OperationId>(bridge: OperationBridge<F, T>): OperationBridge<F, T> {
  return bridge;
}

/** Give each provider the operations bridges can serve for it (applied in registration order, chains included). */
export function applyBridges(providers: readonly ProviderInstance[], bridges: readonly OperationBridge<any, any>[]): void {
  for (const provider of providers) {
    const operations = provider.operations as Record<string, OperationHandler<any> | undefined>;
    for (let changed = true; changed; ) {
      changed = false;
      for (const bridge of bridges) {
        const to = operations[bridge.to];
        if (operations[bridge.from] || !to) continue;
        operations[bridge.from] = bridge.wrap(to, provider);
        changed = true;
      }
    }
  }
}

export interface ProviderRegistryView {
  get(id: string): ProviderInstance | undefined;
  list(): readonly ProviderInstance[];
}

export interface FormatRegistryView {
  list(): readonly WireFormat[];
}

export interface CatalogModel {
  /** The public name clients send. */
  id: string;
  /** Who serves it: a provider id, or `switchyard` for a configured alias. */
  ownedBy: string;
  created: number;
}

export interface ModelCatalogView {
  /** Every routable public model name. */
  list(): readonly CatalogModel[];
  /** The candidate back ends for a public name, in configured order; empty when unknown. */
  candidates(model: string, operation: OperationId): readonly CandidateTarget[];
  /** The configured fallback model names of a public name. */
  fallbacks(model: string): readonly string[];
}

export interface CandidateTarget {
  provider: ProviderInstance;
  model: string;
  weight: number;
  priority: number;
}

// ---------------------------------------------------------------------------------------------
// Wire formats
// ---------------------------------------------------------------------------------------------

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** What a format answers with; the core writes it. */
export type FormatReply =
  | { status?: number; headers?: Record<string, string>; body: unknown }
  | {
      status?: number;
      headers?: Record<string, string>;
      stream: AsyncIterable<string | Uint8Array>;
      /**
       * The text of the event that reports an error after this stream began, when it depends on
       * what the stream already said (default: the format's `renderStreamError`).
       */
      streamError?: (error: ErrorView) => string;
    };

/** What a format reads from a call before validation. */
export interface ParsedCall {
  model: string;
  stream: boolean;
  /** Whether the client asked for usage in its stream. */
  wantsStreamUsage?: boolean;
  /**
   * The format changed the body in place as it read it (a field's other spelling made its own):
   * the client's text is no longer the body's, and a provider gets no text to send as it came.
   */
  rewritten?: boolean;
}

export interface RouteInput {
  readonly body: Record<string, unknown>;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string | string[] | undefined>>;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

interface RouteBase {
  readonly method: HttpMethod;
  /** A path as @koa/router understands it: `/v1/chat/completions`, `/v1beta/models/:model`. */
  readonly path: string;
  /**
   * Serve only the requests whose headers pass (lower-case names), for a method and path that
   * another format's route serves too (a model listing): the other requests go to that route,
   * or are a 404 when there is none.
   */
  readonly onlyIf?: (headers: Readonly<Record<string, string | string[] | undefined>>) => boolean;
}

/** A route that runs the whole pipeline: parse -> validate -> route -> provider -> render. */
export interface CallRoute<O extends OperationId = OperationId> extends RouteBase {
  readonly kind: 'call';
  readonly operation: O;
  /**
   * How the body arrives. `multipart`: multipart/form-data, each file spooled to a temporary file
   * (capped by server.bodyLimit) and in the body as an UploadedFile, deleted when the call ends;
   * text fields the schema types as numbers or booleans are converted. `json-or-multipart`: as
   * the request's Content-Type says (one path for a JSON body and a form). Default `json`.
   */
  readonly body?: 'json' | 'multipart' | 'json-or-multipart';
  /** JSON Schema of the request body, checked by the validation plugin. */
  readonly schema?: JsonSchema;
  /**
   * Read what the pipeline needs from the (not yet validated) body: model, stream. Must not
   * throw on a malformed body; validation reports that.
   */
  parse(input: RouteInput): ParsedCall;
  /** The validated body in the operation's canonical form. Default: the body as it is. */
  toCanonical?(body: Record<string, unknown>, input: RouteInput): CanonicalBody<O>;
  /** Turn the provider's canonical answer into this format's reply. */
  render(response: UpstreamResponse<O>, call: Call, ctx: RequestContext): FormatReply;
  /**
   * A streamed answer's opening chunk (one that carries only the role) reaches this route's
   * clients as an event of its own (chat completions' role chunk, messages' `message_start`):
   * the pipeline then hands a chat or completion stream on from its first chunk, as a proxy
   * relays it (unless the provider asks for more: `primeToAnswer`). Otherwise (the default) it
   * reads on to the first piece of answer before the client has the stream: a back end that fails
   * in between is retried, at no cost to a first byte the client would not have had earlier.
   */
  readonly relaysOpeningChunk?: boolean;
  /**
   * The body field, as this route's clients spell it, that caps how long an answer may be
   * (`max_output_tokens`, `generationConfig.maxOutputTokens`): what a refusal over a token limit
   * or a budget tells the client to lower. Default `max_tokens`.
   */
  readonly outputLimitField?: string;
  /**
   * How long an answer may be when the body sets no limit, where the route's API defines it (the
   * completions API: 16 tokens). Rate limits and budgets reserve that much output for such a call;
   * without it, their own `defaultMaxTokens`.
   */
  readonly defaultOutputTokens?: number;
  /**
   * The canonical request's fields as this route's clients name them, where the names differ (a
   * Gemini client's `outputDimensionality` is the canonical embeddings request's `dimensions`):
   * an error a back end gives about one of them (its `param`) names the client's field instead,
   * in `param` and where the message quotes it. A field's parts follow it (`input[2]`).
   */
  readonly clientParams?: Readonly<Record<string, string>>;
}

export interface RouteHelpers {
  readonly models: ModelCatalogView;
  readonly key?: CallerKey;
}

/** A route answered by the format itself (listings, lookups, admin), after onRequest (auth). */
export interface HandlerRoute extends RouteBase {
  readonly kind: 'handler';
  /** `admin` routes need auth.adminKey instead of a client key. Default `client`. */
  readonly access?: 'client' | 'admin';
  /** Read a JSON body before handle() (POST/PATCH admin routes). */
  readonly readsBody?: boolean;
  handle(ctx: RequestContext, input: RouteInput, helpers: RouteHelpers): Promise<FormatReply> | FormatReply;
}

export type RouteDefinition = CallRoute<any> | HandlerRoute;

export interface WireFormat {
  /** The format's id (`openai-chat`), used in logs and to pick its error renderer. */
  readonly id: string;
  readonly routes: readonly RouteDefinition[];
  /** Headers, besides `Authorization: Bearer`, that may carry the client's key. */
  readonly keyHeaders?: readonly string[];
  /** Query parameters that may carry the client's key (redacted from every log). */
  readonly keyQuery?: readonly string[];
  /**
   * A header, besides `x-request-id`, that carries the request id on every answer of this
   * format's routes: where the vendor's own clients read a call's id from (lower-case).
   */
  readonly requestIdHeader?: string;
  /** The error body in this format's shape. Default: `{"error":{message,type,param,code}}`. */
  renderError?(error: ErrorView): unknown;
  /**
   * The HTTP status of an error answer in this format, where its vendor's clients expect another
   * than the gateway's (`error.status`) for the same failure. Default: the gateway's.
   */
  errorStatus?(error: ErrorView): number;
  /** The text of a stream event that reports an error after the stream began. */
  renderStreamError?(error: ErrorView): string;
  /**
   * Whether this format's clients skip an event-stream comment line (`: keep-alive`), which the
   * gateway writes into a stream silent for `server.streamKeepAliveMs`. Default true; `false`
   * for a format whose vendor never sends one and whose clients fail on it: its streams get none.
   */
  readonly streamComments?: boolean;
}

export interface WireFormatPluginDefinition<O> extends WireFormat {
  readonly name: string;
  readonly version: string;
  readonly description?: string;
  readonly dependencies?: readonly string[];
  readonly optionsSchema?: JsonSchema;
  apply?(api: PluginApi<O>): void | Promise<void>;
}

/** A plugin that registers one wire format. */
export function defineWireFormat<O = Record<string, unknown>>(definition: WireFormatPluginDefinition<O>): GatewayPlugin<O> {
  const { name, version, description, dependencies, optionsSchema, apply, ...format } = definition;
  return {
    name,
    version,
    description,
    dependencies,
    optionsSchema,
    async apply(api) {
      api.registerFormat(format);
      await apply?.(api);
    },
  };
}

export type KoaContext = Koa.Context;

/**
 * What a provider passes to core's upstream helpers to stop the exchange when the attempt ends:
 * the attempt's abort watch, or (in a context made elsewhere) its signal. Reading `signal` makes
 * an AbortSignal; this does not.
 */
export function abortOf(context: Pick<ProviderCallContext, 'abort' | 'signal'>): Abortable {
  return context.abort ?? context.signal;
}
