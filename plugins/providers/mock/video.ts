import { randomBytes } from 'node:crypto';
import type { VideoBackend, VideoPoll, VideoRequest } from '../../../core/index.js';

/**
 * A real, tiny MP4 (H.264 baseline, one 16x16 I_PCM frame shown for 1 s; the same bytes as
 * test/fixtures/tiny-16x16-1s.mp4), served as every finished mock video.
 */
export const MOCK_VIDEO_MP4 = Buffer.from(
  'AAAAIGZ0eXBpc29tAAACAGlzb21pc28yYXZjMW1wNDEAAAJsbW9vdgAAAGxtdmhkAAAAAAAAAAAAAAAAAAAD6AAAA+gAAQAAAQAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgAAAfh0cmFrAAAAXHRraGQAAAADAAAAAAAAAAAAAAABAAAAAAAAA+gAAAAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAABAAAAAABAAAAAQAAAAAAGUbWRpYQAAACBtZGhkAAAAAAAAAAAAAAAAAAAD6AAAA+hVxAAAAAAALWhkbHIAAAAAAAAAAHZpZGUAAAAAAAAAAAAAAABWaWRlb0hhbmRsZXIAAAABP21pbmYAAAAUdm1oZAAAAAEAAAAAAAAAAAAAACRkaW5mAAAAHGRyZWYAAAAAAAAAAQAAAAx1cmwgAAAAAQAAAP9zdGJsAAAAg3N0c2QAAAAAAAAAAQAAAHNhdmMxAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAAABAAEABIAAAASAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAGP//AAAAHWF2Y0MBQsAK/+EABmdCwAraeQEABGjOPIAAAAAYc3R0cwAAAAAAAAABAAAAAQAAA+gAAAAUc3RzcwAAAAAAAAABAAAAAQAAABxzdHNjAAAAAAAAAAEAAAABAAAAAQAAAAEAAAAYc3RzegAAAAAAAAAAAAAAAQAAAYoAAAAUc3RjbwAAAAAAAAABAAAClAAAAZJtZGF0AAABhmWIhKDQYGRobHB0eHyAhIiMkJSYnGBkaGxwdHh8gISIjJCUmJxgZGhscHR4fICEiIyQlJicYGRobHB0eHyAhIiMkJSYnGBkaGxwdHh8gISIjJCUmJxgZGhscHR4fICEiIyQlJicYGRobHB0eHyAhIiMkJSYnGBkaGxwdHh8gISIjJCUmJxgZGhscHR4fICEiIyQlJicYGRobHB0eHyAhIiMkJSYnGBkaGxwdHh8gISIjJCUmJxgZGhscHR4fICEiIyQlJicYGRobHB0eHyAhIiMkJSYnGBkaGxwdHh8gISIjJCUmJxgZGhscHR4fICEiIyQlJicYGRobHB0eHyAhIiMkJSYnICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgA==',
  'base64',
);

/** Milliseconds after submit at which a mock task starts, and finishes. */
export const MOCK_VIDEO_START_MS = 300;
export const MOCK_VIDEO_DONE_MS = 1000;

interface MockTicket {
  /** Submitted at (ms). */
  t: number;
  /** Seconds asked for, of each video. */
  s: number;
  /** Videos asked for (`n`; absent in tickets made before it was kept: one). */
  n?: number;
  /** Behaviour: 'ok', 'fail' (prompt has "[fail]"), 'unknown' (prompt has "[unknown]": an unmapped state first). */
  b: 'ok' | 'fail' | 'unknown';
  r: string;
}

/**
 * The mock video back end. No state: the vendor task id carries when it was submitted, so any
 * gateway instance (or a restarted one) can poll it. queued for 300 ms, in_progress (progress
 * rising) until 1 s, then completed with the tiny MP4 above; "[fail]" in the prompt fails it,
 * "[unknown]" reports a state no mapping knows until 1.5 s, then completes.
 */
async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

export const mockVideo: VideoBackend = {
  async submit(request: VideoRequest) {
    const prompt = request.prompt ?? '';
    const ticket: MockTicket = {
      t: Date.now(),
      s: request.duration ?? 5,
      n: request.n && request.n > 0 ? request.n : 1,
      b: prompt.includes('[fail]') ? 'fail' : prompt.includes('[unknown]') ? 'unknown' : 'ok',
      r: randomBytes(4).toString('hex'),
    };
    return { vendorTaskId: `mockvid_${Buffer.from(JSON.stringify(ticket)).toString('base64url')}`, status: 'queued', rawStatus: 'queued' };
  },

  async poll(vendorTaskId: string): Promise<VideoPoll> {
    let ticket: MockTicket;
    try {
      ticket = JSON.parse(Buffer.from(vendorTaskId.replace(/^mockvid_/, ''), 'base64url').toString('utf8')) as MockTicket;
    } catch {
      return { status: 'failed', rawStatus: 'not_found', error: { code: 'not_found', message: 'No such mock task.' } };
    }
    const age = Date.now() - ticket.t;
    if (ticket.b === 'unknown' && age < MOCK_VIDEO_DONE_MS * 1.5) return { status: 'unknown', rawStatus: 'mystery_state' };
    if (age < MOCK_VIDEO_START_MS) return { status: 'queued', progress: 0, rawStatus: 'queued' };
    if (age < MOCK_VIDEO_DONE_MS) {
      const progress = Math.floor(((age - MOCK_VIDEO_START_MS) / (MOCK_VIDEO_DONE_MS - MOCK_VIDEO_START_MS)) * 100);
      return { status: 'in_progress', progress, rawStatus: 'in_progress' };
    }
    if (ticket.b === 'fail') return { status: 'failed', rawStatus: 'failed', error: { code: 'generation_failed', message: 'The mock was asked to fail.' } };
    // n videos made (the same one n times): their seconds together, as the estimate counted them.
    return { status: 'completed', progress: 100, seconds: ticket.s * (ticket.n ?? 1), format: 'mp4', size: '16x16', rawStatus: 'completed' };
  },

  async content() {
    return { status: 200, contentType: 'video/mp4', contentLength: MOCK_VIDEO_MP4.length, body: once(new Uint8Array(MOCK_VIDEO_MP4)) };
  },
};
