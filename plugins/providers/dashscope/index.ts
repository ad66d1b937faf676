import { defineProvider } from '../../../core/index.js';
import { configSchema, endpointOf, type DashScopeProviderConfig } from './api.js';
import { dashscopeImages } from './images.js';

/**
 * Alibaba Cloud Model Studio's DashScope API as a back end: image generation and editing
 * (qwen-image, qwen-image-edit…) through its multimodal generation endpoint, with its native
 * input.messages / parameters body. Through one keep-alive pool per origin.
 */
export default defineProvider<DashScopeProviderConfig>({
  name: 'dashscope',
  version: '0.1.0',
  description: "Alibaba Cloud DashScope (Model Studio): qwen-image generation and editing through the multimodal generation API.",
  type: 'dashscope',
  configSchema,
  create(config, env) {
    const endpoint = endpointOf(config);
    const pool = env.poolFor(endpoint.origin, config);
    const secrets = [config.apiKey, ...Object.values(config.headers ?? {})];
    const images = dashscopeImages(pool, endpoint, secrets);
    return {
      id: config.id,
      type: config.type,
      models: config.models,
      operations: {
        image: images,
        'image-edit': images,
      },
    };
  },
});
