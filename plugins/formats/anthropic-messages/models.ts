import { GatewayError, modelAllowed, type CatalogModel, type HandlerRoute, type RouteInput } from '../../../core/index.js';

/**
 * GET /v1/models and GET /v1/models/{model_id} as Anthropic's clients call them (with
 * `anthropic-version`, the key in `x-api-key`): the models the key may use, in Anthropic's shape
 * and pages. The same paths without that header are the openai-chat format's listing.
 */

/** Whether a request is an Anthropic client's: it sends a version header, as the API requires. */
export function sendsVersion(headers: Readonly<Record<string, string | string[] | undefined>>, names: readonly string[]): boolean {
  return names.some((name) => {
    const value = headers[name];
    return typeof value === 'string' && value.trim() !== '';
  });
}

/**
 * A model as Anthropic's API describes one. Every model the gateway serves is `active` (a route it
 * no longer serves is not listed); what it cannot know of a back end's model (its context window,
 * its capabilities, its line) is `null`, as the API says of what it does not know, not left out:
 * the SDK declares each field present.
 */
function modelInfo(m: CatalogModel): Record<string, unknown> {
  return {
    type: 'model',
    id: m.id,
    display_name: m.id,
    created_at: new Date(m.created * 1000).toISOString(),
    lifecycle: 'active',
    deprecated_at: null,
    retires_at: null,
    line: null,
    max_input_tokens: null,
    max_tokens: null,
    capabilities: null,
  };
}

const LIFECYCLES = new Set(['active', 'deprecated', 'retired']);

/**
 * The lifecycle stages a listing asks for (`lifecycle[]=retired`, as the SDK sends them, or
 * `lifecycle=`): undefined when it names none (the API then lists active and deprecated models).
 */
function lifecyclesAsked(query: RouteInput['query']): Set<string> | undefined {
  // Repeated (`lifecycle[]=a&lifecycle[]=b`, as the SDKs send it) or comma-separated.
  const given = [query['lifecycle[]'], query.lifecycle]
    .flatMap((v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]))
    .flatMap((v) => v.split(','))
    .map((v) => v.trim());
  if (given.length === 0) return undefined;
  for (const stage of given) {
    if (!LIFECYCLES.has(stage)) throw new GatewayError('invalid_value', { param: 'lifecycle', params: { detail: "each of 'active', 'deprecated' or 'retired'" } });
  }
  return new Set(given);
}

function queryValue(query: RouteInput['query'], name: string): string | undefined {
  const value = query[name];
  return Array.isArray(value) ? value[value.length - 1] : value;
}

/** One page of `models`: `limit` (1-1000, default 20) after `after_id` or before `before_id`. */
export function modelPage(models: readonly CatalogModel[], query: RouteInput['query']): Record<string, unknown> {
  const limitText = queryValue(query, 'limit');
  const limit = limitText === undefined ? 20 : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new GatewayError('invalid_value', { param: 'limit', params: { detail: 'an integer from 1 to 1000' } });
  }
  const afterId = queryValue(query, 'after_id');
  const beforeId = queryValue(query, 'before_id');
  const at = (id: string, param: string) => {
    const index = models.findIndex((m) => m.id === id);
    if (index < 0) throw new GatewayError('invalid_value', { param, params: { detail: `no model ${id}` } });
    return index;
  };
  let page: readonly CatalogModel[];
  let hasMore: boolean;
  if (beforeId !== undefined) {
    const end = at(beforeId, 'before_id');
    const start = Math.max(0, end - limit);
    page = models.slice(start, end);
    hasMore = start > 0;
  } else {
    const start = afterId === undefined ? 0 : at(afterId, 'after_id') + 1;
    page = models.slice(start, start + limit);
    hasMore = start + limit < models.length;
  }
  return { data: page.map(modelInfo), has_more: hasMore, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null };
}

export function modelRoutes(versionHeaders: readonly string[]): HandlerRoute[] {
  const onlyIf = (headers: Readonly<Record<string, string | string[] | undefined>>) => sendsVersion(headers, versionHeaders);
  return [
    {
      kind: 'handler',
      method: 'GET',
      path: '/v1/models',
      onlyIf,
      handle(_ctx, { query }, { models, key }) {
        // Every model served is active: a listing of only deprecated or retired ones is empty.
        const stages = lifecyclesAsked(query);
        const listed = stages === undefined || stages.has('active') ? models.list().filter((m) => modelAllowed(key?.models, m.id)) : [];
        return { body: modelPage(listed, query) };
      },
    },
    {
      kind: 'handler',
      method: 'GET',
      path: '/v1/models/*model',
      onlyIf,
      handle(ctx, { params }, { models, key }) {
        const id = params.model ?? '';
        ctx.model = id;
        const found = models.list().find((m) => m.id === id);
        if (!found || !modelAllowed(key?.models, id)) throw new GatewayError('model_not_found', { params: { model: id }, param: 'model' });
        return { body: modelInfo(found) };
      },
    },
  ];
}
