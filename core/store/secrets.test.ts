import { expect } from 'chai';
import { loggablePath, pathSecrets } from './secrets.js';

describe('loggablePath', () => {
  const made = 'sk-sy-AbCdEfGhIjKlMnOpQrStUvWxYz012345';
  const secrets = pathSecrets(['admin-0123456789abcdef', 'plain+secret/ABCDEFGH']);

  it('shows a key made by the gateway by its prefix wherever it starts a word: a segment, after a dot or a space (escaped or not)', () => {
    expect(loggablePath(`/admin/keys/${made}`)).to.equal('/admin/keys/sk-sy-AbCd…');
    expect(loggablePath(`/v1/models/x.${made}`)).to.equal('/v1/models/x.sk-sy-AbCd…');
    expect(loggablePath(`/admin/keys/Bearer%20${made}`)).to.equal('/admin/keys/Bearer%20sk-sy-AbCd…');
    expect(loggablePath(`/admin/keys/%73k-sy-${made.slice(6)}`)).to.equal('/admin/keys/sk-sy-AbCd…');
    // Not inside a word or an id: `task-…`, `video_sk-…` are ids, not keys; the gateway's own keys anywhere.
    expect(loggablePath('/v1/videos/task-0123456789abcdef')).to.equal('/v1/videos/task-0123456789abcdef');
    expect(loggablePath('/v1/videos/video_sk-0123456789abcdef')).to.equal('/v1/videos/video_sk-0123456789abcdef');
    expect(loggablePath(`/v1/models/x${made}`)).to.equal('/v1/models/xsk-sy-AbCd…');
    // A stray escape that is not UTF-8 does not keep the rest from being read.
    expect(loggablePath(`/admin/keys/%C2%A0${made}%zz`)).to.not.include(made.slice(12));
    // A key whose escaped slash the raw path hid whole is not shown in part once read.
    expect(loggablePath('/v1/models/sk-proj-abcdefgh%2BTAIL%2Fmore')).to.equal('/v1/models/sk-proj-…');
  });

  it("redacts a configuration's secret however it is escaped, and leaves a path without one as it came", () => {
    expect(loggablePath('/admin/keys/%61dmin-0123456789abcdef', secrets)).to.equal('/admin/keys/[redacted]');
    expect(loggablePath('/v1/models/plain%2Bsecret%2FABCDEFGH', secrets)).to.equal('/v1/models/[redacted]');
    expect(loggablePath('/v1/models/meta-llama%2FLlama-3.1-8B', secrets)).to.equal('/v1/models/meta-llama%2FLlama-3.1-8B');
    // Escapes that are not UTF-8 do not stop the search.
    expect(loggablePath('/v1/models/%ff%61dmin-0123456789abcdef', secrets)).to.equal('/v1/models/%ff[redacted]');
  });
});
