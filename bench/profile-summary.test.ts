import { expect } from 'chai';
import { summarizeProfile } from './profile-summary.js';

type Frame = [functionName: string, url: string];

/** A profile of the given stacks (root first), each sampled `micros` microseconds. */
function profileOf(stacks: Array<{ frames: Frame[]; micros: number }>) {
  const nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children: number[] }> = [
    { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: 0 }, children: [] },
  ];
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  for (const { frames, micros } of stacks) {
    let parent = nodes[0]!;
    for (const [functionName, url] of frames) {
      const node = { id: nodes.length + 1, callFrame: { functionName, url, lineNumber: 1 }, children: [] };
      nodes.push(node);
      parent.children.push(node.id);
      parent = node;
    }
    samples.push(parent.id);
    timeDeltas.push(micros);
  }
  return { nodes, samples, timeDeltas };
}

const AJV_CODEGEN = '/app/node_modules/ajv/dist/compile/codegen/index.js';

describe('bench profile summary', () => {
  it('leaves out start-up wherever it is on the stack: module loading, and the validators ajv compiles', () => {
    const { busySeconds, shares } = summarizeProfile(
      profileOf([
        // ajv's code generator under a plugin's apply: start-up, though its leaf is in ajv.
        { frames: [['apply', 'file:///app/plugins/validation/index.js'], ['compile', '/app/node_modules/ajv/dist/core.js'], ['addNames', AJV_CODEGEN]], micros: 600 },
        // undici's code loaded from node_modules is not start-up: its leaf names its area.
        { frames: [['runCall', 'file:///app/core/pipeline.js'], ['writeH1', '/app/node_modules/undici/lib/dispatcher/client-h1.js']], micros: 300 },
        // A request's validation: the compiled validator, under the validation plugin.
        { frames: [['runCall', 'file:///app/core/pipeline.js'], ['(anon)', 'file:///app/plugins/validation/index.js'], ['validate10', '']], micros: 100 },
        { frames: [['loadESM', 'node:internal/modules/esm/loader'], ['wrapSafe', 'node:internal/modules/cjs/loader']], micros: 1_000 },
      ]),
    );
    expect(busySeconds).to.be.closeTo(0.0004, 1e-9);
    expect(Object.fromEntries(shares)).to.deep.equal({ 'the upstream call (undici, provider)': 75, 'validation (ajv)': 25 });
  });
});
