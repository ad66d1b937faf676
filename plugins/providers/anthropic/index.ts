import { defineProvider } from '../../../core/index.js';
import { configSchema, DEFAULT_MAX_TOKENS, endpointOf, type AnthropicProviderConfig } from './api.js';
import { chatHandler } from './chat.js';

/** Anthropic's Messages API (chat), through one keep-alive pool per origin. */
export default defineProvider<AnthropicProviderConfig>({
  name: 'anthropic',
  version: '0.1.0',
  description: "Anthropic's Messages API: chat, streaming, tools, thinking with signatures, cache usage.",
  type: 'anthropic',
  configSchema,
  create(config, env) {
    const endpoint = endpointOf(config);
    const pool = env.poolFor(endpoint.origin, config);
    const secrets = [config.apiKey, ...Object.values(config.headers ?? {})];
    return {
      id: config.id,
      type: config.type,
      models: config.models,
      operations: {
        chat: chatHandler(pool, endpoint, secrets, config.defaultMaxTokens ?? DEFAULT_MAX_TOKENS),
      },
    };
  },
});
