/**
 * The parts of undici the gateway uses (Pool, Agent and the request API), loaded on their own.
 *
 * `import 'undici'` loads all of it: fetch, WebSocket, EventSource, caches, cookies, the mock
 * agent. The gateway needs three modules of it, and loading only those keeps about 10 MB out of
 * every gateway's resident memory (docs/performance.md). undici has no `exports` map, so these
 * paths are its public files as much as `index.js` is; the types are undici's own, and the test
 * suite, which makes every upstream call through these, fails if a release moves them.
 */
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const require = createRequire(import.meta.url);

export const Pool = require('undici/lib/dispatcher/pool.js') as typeof Undici.Pool;
export const Agent = require('undici/lib/dispatcher/agent.js') as typeof Undici.Agent;
export type Pool = Undici.Pool;
export type Agent = Undici.Agent;
export const buildConnector = require('undici/lib/core/connect.js') as typeof Undici.buildConnector;
export const ConnectTimeoutError = (require('undici/lib/core/errors.js') as typeof Undici.errors).ConnectTimeoutError;

// undici's index gives every dispatcher its request API (request, stream, pipeline, upgrade,
// connect); the modules alone do not. A provider's `env.pool()` is documented as an undici Pool,
// `pool.request(...)` included, so the gateway's pools get the same methods.
const dispatcherPrototype = (require('undici/lib/dispatcher/dispatcher.js') as { prototype: Record<string, unknown> }).prototype;
for (const [name, method] of Object.entries(require('undici/lib/api/index.js') as Record<string, unknown>)) {
  if (!(name in dispatcherPrototype)) dispatcherPrototype[name] = method;
}

type RequestOptions = Omit<Undici.Dispatcher.RequestOptions, 'origin' | 'path'>;
const requestOn = require('undici/lib/api/api-request.js') as (
  this: Undici.Dispatcher,
  options: Undici.Dispatcher.RequestOptions,
) => Promise<Undici.Dispatcher.ResponseData>;

/** undici's `request(url, options)` through `dispatcher`: the answer's status, headers and body stream. */
export function request(url: URL, dispatcher: Undici.Dispatcher, options: RequestOptions): Promise<Undici.Dispatcher.ResponseData> {
  return requestOn.call(dispatcher, { ...options, origin: url.origin, path: `${url.pathname}${url.search}` });
}
