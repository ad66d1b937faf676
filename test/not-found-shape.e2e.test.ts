import { expect } from 'chai';
import { startGateway, type RunningGateway } from './support/gateway.js';

describe('an unknown path answers 404 in the shape of the closest format', () => {
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: warn, format: json }
storage: { driver: sqlite, url: ':memory:' }
plugins: [routing, openai-chat, anthropic-messages, gemini]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
  });
  after(() => gw.stop());

  const get = async (path: string) => {
    const response = await fetch(`${gw.url}${path}`);
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('Gemini paths get Gemini errors, Messages paths Anthropic ones, anything else the OpenAI shape', async () => {
    const gemini = await get('/v1beta/models/mock-chat:unknownMethod');
    expect(gemini.status).to.equal(404);
    expect(gemini.body).to.have.nested.property('error.status', 'NOT_FOUND');
    expect(gemini.body).to.have.nested.property('error.code', 404);

    const messages = await get('/v1/messages/batches');
    expect(messages.status).to.equal(404);
    expect(messages.body).to.include({ type: 'error' });
    expect(messages.body).to.have.nested.property('error.type', 'not_found_error');

    for (const path of ['/v1/unknown', '/nothing/here']) {
      const other = await get(path);
      expect(other.status).to.equal(404);
      expect(other.body).to.have.nested.property('error.code', 'not_found');
      expect(other.body).to.have.nested.property('error.type');
    }
  });
});
