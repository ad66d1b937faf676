import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import type { OperationId, Usage } from './operations.js';
import type { ProviderInstance } from './plugin.js';
import type { GatewayError } from './errors.js';

/** What the auth plugin learned about the caller. `prefix` is safe to log; the secret never is. */
export interface CallerKey {
  id: string;
  name: string;
  prefix: string;
  /** Model name globs the key may use; undefined = any. */
  models?: string[];
  /** Limits of this key (undefined: the rate-limit plugin's defaults apply). */
  rpm?: number;
  tpm?: number;
  maxConcurrent?: number;
  /** Spending limit; undefined = none. */
  budget?: number;
}

/** One back end a call may be sent to. */
export interface Target {
  provider: ProviderInstance;
  /** The model name the back end knows. */
  model: string;
  /** The public model name a fallback target was reached through (the call asked for another). */
  via?: string;
  weight?: number;
  priority?: number;
}

/** One try at one target, kept for the operator's log. */
export interface Attempt {
  provider: string;
  model: string;
  status: number | 'error';
  durationMs: number;
  /**
   * The back end's part of `durationMs`: from the request leaving to the last of its bytes the
   * attempt read (a JSON answer's end, a stream's first piece), or to the attempt's end when a
   * read of the answer was still pending then (a stream handed on while the back end is silent),
   * when the provider used the gateway's HTTP client; the rest (making the request, reading and
   * translating the answer) was the gateway's.
   */
  upstreamMs?: number;
  /** The back end's own id for its answer (see AttemptClock.upstreamRequestId). */
  upstreamRequestId?: string;
  error?: string;
  /** What went wrong, as the client would be told (at most 300 characters): why a back end failed, for the operator's log. */
  message?: string;
  /** The back end never saw it: it waited in the pool for a connection and ended first (see AttemptClock.unsent). */
  unsent?: true;
}

/** What the pipeline tells `onAttempt` about one try. */
export interface AttemptOutcome {
  target: Target;
  /** The upstream status when the answer began; undefined when it failed before. */
  status?: number;
  error?: GatewayError;
  durationMs: number;
  /** How long the back end asked to be left alone (its Retry-After), if it said. */
  retryAfterMs?: number;
}

/** A parsed call: what the client asked for, in the format it asked in. */
export interface Call {
  operation: OperationId;
  /** The public model name as the client sent it. */
  model: string;
  stream: boolean;
  /** The wire format the call arrived in (`openai-chat`, ...). */
  format: string;
  /** The request body as the client sent it (already parsed). */
  body: Record<string, unknown>;
  /** The raw body text, when the format keeps it (for pass-through). */
  rawBody?: string;
  /** The body in the canonical form of the operation (what providers receive). */
  canonical: unknown;
  /** Whether the client asked for usage inside its stream. */
  wantsStreamUsage: boolean;
  /** The JSON Schema of the route's body, for the validation plugin. */
  schema?: object;
}

/**
 * Per-request state, created when a request arrives and handed to every hook. Plugins keep
 * their own state in `state` under their plugin name.
 */
export interface RequestContext {
  readonly id: string;
  /** performance.now() when the request arrived (milliseconds, fractional). */
  readonly startedAt: number;
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly query: Readonly<Record<string, string | string[] | undefined>>;
  /** Aborted when the client goes away or the gateway gives up on the request. */
  readonly signal: AbortSignal;
  /**
   * The same news as `signal`, as the pipeline watches it on every call: a plain callback list,
   * so that no AbortSignal is made for a request unless a plugin reads `signal`.
   */
  readonly client?: ClientLink;
  /** The wire format whose route matched, once one did. */
  format?: string;
  /** Where the format's route says the client's key may be found, besides the Bearer token. */
  keyHeaders?: readonly string[];
  keyQuery?: readonly string[];
  operation?: OperationId;
  /** The body field the route's clients lower to ask for a shorter answer (CallRoute.outputLimitField), once a call route matched. */
  outputLimitField?: string;
  /** How long an answer may be when the body sets no limit (CallRoute.defaultOutputTokens), once a call route matched. */
  defaultOutputTokens?: number;
  model?: string;
  stream?: boolean;
  key?: CallerKey;
  target?: Target;
  attempts: Attempt[];
  usage?: Usage;
  /**
   * Set while a stream whose answer is over may still bring the back end's usage (a chat back
   * end's usage chunk after the finish): a client that leaves now is settled (onResponse) once
   * it came or the short wait for it ended, not at once. Resolved and cleared when the stream ends.
   */
  usagePending?: Promise<void>;
  status?: number;
  errorCode?: string;
  /** Per-plugin scratch space, keyed by plugin name. */
  readonly state: Map<string, unknown>;
  /** Who the route is for: API clients, or the operator (`/admin/*`, checked against auth.adminKey). */
  access: 'client' | 'admin';
  /** Set by the plugin that checked the admin key. Admin routes refuse to run without it. */
  adminVerified?: boolean;
  /** The caller's address (the socket's; no proxy header is trusted). */
  readonly clientIp: string;
  readonly userAgent: string | undefined;
  /** Every target the call may try, in order, once routing decided. */
  targets?: readonly Target[];
  /** Headers plugins add to the reply, error replies included (rate-limit headers, cost). */
  readonly responseHeaders: Record<string, string>;
  /** performance.now() when the first byte of the answer went to the client. */
  firstByteAt?: number;
  /**
   * Time spent waiting on a back end outside any attempt (a handler route that fetches a video or
   * asks a vendor for a task's status; see waitingOnUpstream): the back end's, not the gateway's.
   */
  upstreamWaitMs?: number;
  /** Time spent waiting for the client to send its body, when it did not come with the headers: the client's. */
  bodyWaitMs?: number;
  /** What the call cost, once metering knows. */
  cost?: number;
  /** Where rc.usage came from: the back end's own figures, or counted by the gateway. */
  usageSource?: 'provider' | 'estimated';
  /**
   * The call's usage row is already in the ledger (and its cost in the key's spent), written by a
   * plugin in the same transaction as what it paid for (a video task): metering records no
   * other row for the call.
   */
  usageRecorded?: boolean;
  /**
   * What a wire format could not carry across when it translated the call (or its answer)
   * through the canonical form: names such as `top_k`, `cache_control`, `metadata.foo`.
   * Empty or absent when nothing was lost.
   */
  losses?: string[];
  /** How the request ended, once it has. */
  endReason?: 'done' | 'client_gone' | 'upstream_error' | 'timeout' | 'rejected' | 'shutdown';
}

export function elapsedMs(ctx: Pick<RequestContext, 'startedAt'>): number {
  return performance.now() - ctx.startedAt;
}

/** Whether the client is still there, and who wants to know when it leaves. */
export class ClientLink {
  private left = false;
  private stopping = false;
  private watchers: Array<() => void> = [];
  /** Its neighbours in a ServingList (the gateway's requests being served). */
  prev: ClientLink | undefined = undefined;
  next: ClientLink | undefined = undefined;
  /** The response being written to the client, once the gateway serves it. */
  reply: ServerResponse | undefined = undefined;
  /** Since when its ended answer has waited on a client that reads none of it, and the bytes written then (see the gateway's sweep). */
  stalledSince: number | undefined = undefined;
  stalledBytes = 0;
  /** The gateway closed its connection for reading none of its answer: not delivered, whatever node says of the response. */
  letGo = false;

  get gone(): boolean {
    return this.left;
  }

  /** The gateway stopped waiting for this request (see ClientWatch.stopped). */
  get stopped(): boolean {
    return this.stopping;
  }

  /** Call `fn` once when the client leaves or the gateway stops waiting (at once if either happened). */
  watch(fn: () => void): void {
    if (this.left || this.stopping) fn();
    else this.watchers.push(fn);
  }

  unwatch(fn: () => void): void {
    const i = this.watchers.indexOf(fn);
    if (i !== -1) this.watchers.splice(i, 1);
  }

  /** The client left: tell every watcher, once. */
  leave(): void {
    if (this.left) return;
    this.left = true;
    this.tell();
  }

  /** The gateway is stopping and waits for this request no longer: its attempts end with gateway_shutdown, told to the client. */
  stop(): void {
    if (this.left || this.stopping) return;
    this.stopping = true;
    this.tell();
  }

  private tell(): void {
    const watchers = this.watchers;
    this.watchers = [];
    for (const fn of watchers) fn();
  }
}

/**
 * The client links of the requests being served, as a list threaded through the links
 * themselves: adding and removing one allocates and hashes nothing (a Set of the request
 * objects cost 13% more CPU a chat call, side by side: V8 gives an object put in a Set an
 * identity hash, and the request context seems to pay for it on later accesses).
 */
export class ServingList {
  private head: ClientLink | undefined;

  add(link: ClientLink): void {
    link.prev = undefined;
    link.next = this.head;
    if (this.head) this.head.prev = link;
    this.head = link;
  }

  delete(link: ClientLink): void {
    if (link.prev) link.prev.next = link.next;
    else if (this.head === link) this.head = link.next;
    else return;
    if (link.next) link.next.prev = link.prev;
    link.prev = undefined;
    link.next = undefined;
  }

  /** Call `fn` with every request in the list. */
  each(fn: (link: ClientLink) => void): void {
    for (let link = this.head; link; ) {
      const next = link.next;
      fn(link);
      link = next;
    }
  }

  /** Tell every request in the list that the gateway stops waiting for it (see ClientLink.stop). */
  stopAll(): void {
    for (let link = this.head; link; ) {
      const next = link.next;
      link.stop();
      link = next;
    }
  }
}

/** Whether the request's client has left. */
export function clientGone(rc: RequestContext): boolean {
  return rc.client ? rc.client.gone : rc.signal.aborted;
}

/**
 * The RequestContext the gateway makes for each request: a class, so that the lazily made parts
 * (the parsed query, an AbortSignal) are getters on its prototype rather than two closures per
 * request.
 */
export class LiveRequest implements RequestContext {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly client = new ClientLink();
  attempts: Attempt[] = [];
  readonly state = new Map<string, unknown>();
  access: 'client' | 'admin' = 'client';
  readonly clientIp: string;
  readonly userAgent: string | undefined;
  readonly responseHeaders: Record<string, string> = {};
  #search: string;
  #query: Record<string, string | string[] | undefined> | undefined;
  #controller: AbortController | undefined;

  constructor(
    readonly id: string,
    req: IncomingMessage,
    readonly path: string,
    search: string,
    /** When the request's headers were read (performance.now()). */
    readonly startedAt: number = performance.now(),
  ) {
    this.method = req.method ?? 'GET';
    this.headers = req.headers;
    this.clientIp = req.socket.remoteAddress ?? '';
    this.userAgent = req.headers['user-agent'] || undefined;
    this.#search = search;
  }

  /** Parsed only if something reads it (few calls carry a query string). */
  get query(): Readonly<Record<string, string | string[] | undefined>> {
    return (this.#query ??= this.#search ? (parseQuery(this.#search) as Record<string, string | string[] | undefined>) : {});
  }

  /** Made only if something reads it (the pipeline watches `client` instead). */
  get signal(): AbortSignal {
    if (!this.#controller) {
      const made = new AbortController();
      this.#controller = made;
      this.client.watch(() => made.abort());
    }
    return this.#controller.signal;
  }
}

/** The entry of a call's `state` that says a plugin counts its prompt before it goes up (see countsPrompt). */
const PROMPT_COUNTED = 'core:prompt-counted';

/**
 * Say that a plugin counts this call's prompt before it goes up (the rate-limit plugin's
 * tokens-per-minute estimate): a format whose back end keeps earlier turns itself then attaches
 * them to the body going up (keptHistory), which it spares the calls nobody counts, since
 * reading them walks the store.
 */
export function countsPrompt(rc: Pick<RequestContext, 'state'>): void {
  rc.state.set(PROMPT_COUNTED, true);
}

/** Whether a plugin said it counts this call's prompt (see countsPrompt). */
export function promptCounted(rc: Pick<RequestContext, 'state'>): boolean {
  return rc.state.has(PROMPT_COUNTED);
}

/** What waitingOnUpstream adds to: a request's context. */
export type UpstreamWaits = Pick<RequestContext, 'upstreamWaitMs'>;

/**
 * Wait for `work`, a request to a back end made outside any attempt (a handler route's), and add
 * the wait to the request's `upstreamWaitMs`, which `x-switchyard-overhead-ms` leaves out, as it
 * leaves out an attempt's time at its back end. Without a request to charge, `work` as it is.
 */
export async function waitingOnUpstream<T>(waits: UpstreamWaits | undefined, work: Promise<T>): Promise<T> {
  if (!waits) return work;
  const started = performance.now();
  try {
    return await work;
  } finally {
    waits.upstreamWaitMs = (waits.upstreamWaitMs ?? 0) + performance.now() - started;
  }
}
