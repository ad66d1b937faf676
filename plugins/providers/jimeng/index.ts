import { defineProvider, videoProvider } from '../../../core/index.js';
import { configSchema, DEFAULT_BASE_URL, DEFAULT_VERSION, endpointOf, type JimengProviderConfig } from './api.js';
import { jimengBackend } from './video.js';

/**
 * Jimeng (即梦) video through Volcengine's visual API: CVSync2AsyncSubmitTask to submit,
 * CVSync2AsyncGetResult to poll, every call signed with Volcengine's HMAC-SHA256 scheme from
 * `accessKey` / `secretKey`. A video back end for the task engine (`video` operation).
 */
export default defineProvider<JimengProviderConfig>({
  name: 'jimeng',
  version: '0.1.0',
  description: 'Jimeng (即梦) video generation through the Volcengine visual API (signed HMAC-SHA256 requests).',
  type: 'jimeng',
  configSchema,
  create(given, env) {
    const config: JimengProviderConfig = {
      ...given,
      baseUrl: given.baseUrl || DEFAULT_BASE_URL,
      region: given.region || 'cn-north-1',
      service: given.service || 'cv',
      version: given.version || DEFAULT_VERSION,
    };
    const endpoint = endpointOf(config);
    const pool = env.poolFor(endpoint.origin, config);
    const video = jimengBackend({ pool, endpoint, config });
    return videoProvider(config, video);
  },
});
