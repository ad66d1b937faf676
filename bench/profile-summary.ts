/**
 * Where a gateway profile's CPU went, by area: `node dist/bench/profile-summary.js FILE.cpuprofile`
 * (a profile from `npm run bench -- --cpu-prof DIR`). Each sample is counted once: as start-up if
 * any frame of its stack is start-up work (module loading, validators compiled), else under the
 * first area found walking its stack from the leaf. Shares are of the busy time with start-up left
 * out. The areas are the ones docs/performance.md quotes.
 */
import { readFileSync } from 'node:fs';
import { isMain } from './proc.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const STARTUP = 'start-up (module loading, validators compiled)';
export const AREAS: ReadonlyArray<[string, RegExp]> = [
  ['rate-limit windows (MemoryCounters)', /memory-counters|rate-limit\/index/],
  ["metering's budget admission: tokenizer", /gpt-tokenizer|metering\/tokens/],
  ["metering's budget admission: keys.spent() (SQLite)", /^spent .*sqlite/],
  ['usage and request-log batch writes (SQLite)', /BatchQueue|flushNow|better-sqlite3/],
  ['access log (winston formats it even when the level drops it)', /winston|logform|safe-stable-stringify|accessLog/],
  ['validation (ajv)', /ajv|validation\/index|validate\d+/],
  ['auth (hash and lookup)', /auth\/index|secrets\.js|findByHash/],
  ['AbortController / AbortSignal', /abort_controller|domexception/],
  ['reading and parsing the JSON body', /koa-body|co-body|bourne|raw-body|http\/body\.js/],
  ['SSE: parse each event, re-serialise each chunk', /sse\.js|chunksOf|chatEvents|openai-chat\/index/],
  ['the upstream call (undici, provider)', /undici|providers\/openai/],
  ['Koa, router, koa-compose', /koa|delegates|@koa\/router|koa-compose|only\/|statuses|on-finished|cookies/],
  ['core pipeline, gateway, hooks (tapable)', /core\/(pipeline|gateway|hooks|attempt|context)|tapable/],
  ['routing plugin', /routing\//],
  ['metering plugin (other)', /metering\//],
  ["Node's HTTP server and sockets", /_http_|node:net|stream_base|writev|node:internal\/streams/],
  ['garbage collection', /garbage collector/],
];

/**
 * Start-up work, wherever it is on the stack: loading modules, and compiling the ajv validators
 * (each plugin compiles its schemas when it is applied, once). Checked over the whole stack before
 * the areas, so that ajv's code generator is not counted as validating requests.
 */
const STARTUP_FRAME = /node:internal\/modules\/|compileSourceTextModule|wrapSafe|readFileUtf8|fstat|^(compileSchema|_compileSchemaEnv|compile) .*ajv\//;

export function summarizeProfile(profile: Profile): { busySeconds: number; shares: Array<[string, number]> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (id: number) => {
    const f = byId.get(id)!.callFrame;
    return `${f.functionName || '(anon)'} ${f.url}:${f.lineNumber + 1}`;
  };
  const areaOf = new Map<number, string>();
  const findArea = (leaf: number): string => {
    const known = areaOf.get(leaf);
    if (known) return known;
    let area = 'everything else';
    for (let cur: number | undefined = leaf; cur !== undefined; cur = parent.get(cur)) {
      if (STARTUP_FRAME.test(label(cur))) {
        areaOf.set(leaf, STARTUP);
        return STARTUP;
      }
    }
    for (let cur: number | undefined = leaf; cur !== undefined; cur = parent.get(cur)) {
      const name = label(cur);
      const hit = AREAS.find(([, re]) => re.test(name));
      if (hit) {
        area = hit[0];
        break;
      }
    }
    areaOf.set(leaf, area);
    return area;
  };
  const time = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    if (byId.get(id)?.callFrame.functionName === '(idle)') return;
    const dt = profile.timeDeltas[i] ?? 0;
    busy += dt;
    const area = findArea(id);
    time.set(area, (time.get(area) ?? 0) + dt);
  });
  const steady = busy - (time.get(STARTUP) ?? 0);
  time.delete(STARTUP);
  const shares = [...time].map(([area, t]) => [area, steady > 0 ? (100 * t) / steady : 0] as [string, number]).sort((a, b) => b[1] - a[1]);
  return { busySeconds: steady / 1e6, shares };
}

if (isMain(import.meta.url)) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node dist/bench/profile-summary.js FILE.cpuprofile\n');
    process.exit(2);
  }
  const { busySeconds, shares } = summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as Profile);
  process.stdout.write(`busy CPU after start-up: ${busySeconds.toFixed(2)} s\n\n| area | share |\n|---|---:|\n`);
  for (const [area, share] of shares) process.stdout.write(`| ${area} | ${share.toFixed(1)}% |\n`);
}
