import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';

/**
 * A mark beside the SQLite file for each gateway process serving it (`<store>.gateway-<host>-<pid>`),
 * so that a second gateway started on the same file says so: each process keeps its own
 * reservations, rate-limit windows and key cache, so two of them can together let a key past its
 * budget or its limits. Marks of processes of this host that are gone (a crash) are removed;
 * another host's are left alone (its processes cannot be seen from here).
 */
export function markStoreServed(file: string, onShared: (others: number[]) => void): () => void {
  if (file === ':memory:') return () => undefined;
  const dir = path.dirname(file);
  const host = hostname().replace(/[^A-Za-z0-9.-]/g, '_');
  const prefix = `${path.basename(file)}.gateway-${host}-`;
  const others: number[] = [];
  let names: string[] = [];
  try {
    names = readdirSync(dir);
  } catch {
    return () => undefined;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length));
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (alive(pid)) others.push(pid);
    else rmSync(path.join(dir, name), { force: true });
  }
  if (others.length > 0) onShared(others);
  const own = path.join(dir, `${prefix}${process.pid}`);
  try {
    writeFileSync(own, `${process.pid}\n`, { mode: 0o600 });
  } catch {
    return () => undefined;
  }
  return () => rmSync(own, { force: true });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, as another user's.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
