import { expect } from 'chai';
import { applyBridges, defineBridge, type OperationHandler, type ProviderInstance } from './plugin.js';

const handler = (name: string): OperationHandler<any> => async () => ({ kind: 'json', status: 200, body: name });

function provider(operations: Record<string, OperationHandler<any>>): ProviderInstance {
  return { id: 'p', type: 't', models: [], operations };
}

describe('operation bridges', () => {
  const viaChat = defineBridge({
    from: 'responses',
    to: 'chat',
    wrap: (chat) => async (request, context) => {
      const answer = await chat({ ...request, operation: 'chat' } as never, context);
      return { ...answer, body: `bridged ${(answer as { body: unknown }).body}` } as never;
    },
  });

  it('gives a provider without the operation a handler built on the one it has', async () => {
    const p = provider({ chat: handler('chat') });
    applyBridges([p], [viaChat]);
    const answer = await p.operations.responses!({} as never, {} as never);
    expect((answer as { body: unknown }).body).to.equal('bridged chat');
  });

  it("leaves a provider's own handler alone, and a provider without the target operation without one", async () => {
    const own = provider({ chat: handler('chat'), responses: handler('native') });
    const none = provider({ embeddings: handler('e') });
    applyBridges([own, none], [viaChat]);
    expect(((await own.operations.responses!({} as never, {} as never)) as { body: unknown }).body).to.equal('native');
    expect(none.operations.responses).to.equal(undefined);
  });

  it('follows chains of bridges whatever order they were registered in', async () => {
    const compactViaResponses = defineBridge({
      from: 'compact',
      to: 'responses',
      wrap: (responses) => async (request, context) => responses(request as never, context) as never,
    });
    const p = provider({ chat: handler('chat') });
    applyBridges([p], [compactViaResponses, viaChat]);
    expect(((await p.operations.compact!({} as never, {} as never)) as { body: unknown }).body).to.equal('bridged chat');
  });
});
