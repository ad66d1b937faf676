import { defineProvider } from '../../../core/index.js';
import { configSchema, endpointOf, type GeminiProviderConfig } from './api.js';
import { chatHandler } from './chat.js';
import { imageOperations } from './images.js';

/** Google's generateContent API (chat), through one keep-alive pool per origin. */
export default defineProvider<GeminiProviderConfig>({
  name: 'gemini-provider',
  version: '0.1.0',
  description: "Google's Gemini generateContent API: chat, streaming, function calling, thinking, usage metadata.",
  type: 'gemini',
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
        chat: chatHandler(pool, endpoint, secrets, config.imageFetch),
        ...imageOperations(pool, endpoint, secrets, config.imageFetch),
      },
    };
  },
});
