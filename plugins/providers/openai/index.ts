import { defineProvider } from '../../../core/index.js';
import { configSchema, endpointOf, type OpenAIProviderConfig } from './api.js';
import { chatHandler } from './chat.js';
import { embeddingsHandler } from './embeddings.js';

/** Any OpenAI-compatible back end, through one keep-alive pool per origin. */
export default defineProvider<OpenAIProviderConfig>({
  name: 'openai',
  version: '0.1.0',
  description: 'OpenAI and OpenAI-compatible back ends.',
  type: 'openai',
  configSchema,
  create(config, env) {
    const endpoint = endpointOf(config);
    const pool = env.pool(endpoint.origin, {
      connections: config.connections,
      connectTimeoutMs: config.timeouts?.connectMs,
      headersTimeoutMs: config.timeouts?.firstByteMs,
      bodyTimeoutMs: config.timeouts?.idleMs,
    });
    const secrets = [config.apiKey, ...Object.values(config.headers ?? {})];
    return {
      id: config.id,
      type: config.type,
      models: config.models,
      operations: {
        chat: chatHandler(pool, endpoint, secrets),
        embeddings: embeddingsHandler(pool, endpoint, secrets),
      },
    };
  },
});
