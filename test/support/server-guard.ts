import childProcess, { ChildProcess } from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';
import path from 'node:path';

/**
 * What `npm run test:unit` refuses: a connection to a local server's port, or the start of a server
 * binary. A test file that needs either belongs to the full suite (`npm test`), not to the unit list
 * in .mocharc.unit.cjs; in-process servers (node:http on port 0, PGlite, the fake Kubernetes API) are
 * fine.
 */
export const SERVER_PORTS: ReadonlyMap<number, string> = new Map([
  [5432, 'PostgreSQL'],
  [6379, 'Redis'],
  [5672, 'RabbitMQ'],
  [15672, 'RabbitMQ management'],
]);

const SERVER_BINARIES =
  /^(postgres|pg_ctl|pg_ctlcluster|initdb|pg_basebackup|redis-server|redis-cli|rabbitmq-server|rabbitmqctl|chromium|chrome|radosgw|ceph.*|nginx|npm|wrk)$/;

/** Why `target` is refused in a unit run, or undefined when it is not a server. */
export function serverConnection(port: unknown): string | undefined {
  const name = SERVER_PORTS.get(Number(port));
  return name && `connects to ${name} (port ${Number(port)})`;
}

export function serverBinary(file: unknown): string | undefined {
  const command =
    String(file ?? '')
      .trim()
      .split(/\s+/)[0] ?? '';
  return SERVER_BINARIES.test(path.basename(command)) ? `starts ${path.basename(command)}` : undefined;
}

/** ChildProcess's own spawn (untyped in @types/node): every asynchronous child (spawn, execFile, exec, fork) starts through it. */
export function childPrototype(): { spawn(this: ChildProcess, options: { file?: string }): unknown } {
  return ChildProcess.prototype as unknown as { spawn(this: ChildProcess, options: { file?: string }): unknown };
}

/** The port of a `socket.connect(...)` call, in any of its forms (net.connect passes its normalized args as an array). */
function portOf(args: unknown[]): unknown {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (first && typeof first === 'object') return (first as { port?: unknown }).port;
  return typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first)) ? first : undefined;
}

/**
 * Refuse server connections and server binaries in this process until the returned function is
 * called: a connection fails as a refused one would (an 'error' event), a spawn throws. Each refusal
 * is also passed to `refused`, so that a run can fail the test that tried even where the code under
 * test swallowed the error.
 */
export function refuseServers(refused: (why: string) => void): () => void {
  const connect = net.Socket.prototype.connect;
  const child = childPrototype();
  const spawn = child.spawn;
  const sync = { spawnSync: childProcess.spawnSync, execFileSync: childProcess.execFileSync, execSync: childProcess.execSync };
  const refuse = (why: string): Error => {
    const message = `test:unit refuses a test that ${why}: list its file in the full suite only (.mocharc.unit.cjs)`;
    refused(message);
    return Object.assign(new Error(message), { code: 'ECONNREFUSED' });
  };
  net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
    const why = serverConnection(portOf(args));
    if (!why) return (connect as (...a: unknown[]) => net.Socket).apply(this, args);
    const err = refuse(why);
    process.nextTick(() => this.destroy(err));
    return this;
  } as typeof connect;
  child.spawn = function (this: ChildProcess, options: { file?: string }) {
    const why = serverBinary(options?.file);
    if (why) throw refuse(why);
    return spawn.call(this, options);
  };
  for (const name of Object.keys(sync) as Array<keyof typeof sync>) {
    const original = sync[name] as (...a: unknown[]) => unknown;
    (childProcess as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      const why = serverBinary(args[0]);
      if (why) throw refuse(why);
      return original(...args);
    };
  }
  syncBuiltinESMExports();
  return () => {
    net.Socket.prototype.connect = connect;
    child.spawn = spawn;
    Object.assign(childProcess, sync);
    syncBuiltinESMExports();
  };
}
