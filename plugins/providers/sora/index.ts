import { defineProvider, videoProvider } from '../../../core/index.js';
import { configSchema, endpointOf, type SoraProviderConfig } from './api.js';
import { soraBackend } from './video.js';

/**
 * OpenAI's video API (Sora) as a video back end: `POST {base}/videos` (multipart: model, prompt,
 * seconds, size, input_reference), `GET {base}/videos/{id}` to poll, `GET {base}/videos/{id}/content`
 * to stream the finished video through the gateway (it needs the Bearer key, so clients never
 * get the vendor's address).
 */
export default defineProvider<SoraProviderConfig>({
  name: 'sora',
  version: '0.1.0',
  description: "OpenAI's video generation API (/v1/videos: Sora), multipart create, poll and content download.",
  type: 'sora',
  configSchema,
  create(config, env) {
    const endpoint = endpointOf(config);
    const pool = env.poolFor(endpoint.origin, config);
    const video = soraBackend({ pool, endpoint, config });
    return videoProvider(config, video);
  },
});
