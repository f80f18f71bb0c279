import { execFile } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePorts } from './ports.js';
import { cleanUpAtExit, sharedPerRun, startWithRetries } from './throwaway.js';
import { eventually } from './eventually.js';

const run = promisify(execFile);

const PG_BIN = process.env.STRATA_PG_BIN ?? '/usr/lib/postgresql/15/bin';
const HOST = '127.0.0.1';

export interface PgReplicaHarness {
  /** Throw-away primary (wal_level=replica): `postgres://postgres@127.0.0.1:<port>/postgres`. */
  primaryUrl: string;
  /** Hot standby streaming from the primary (read-only). */
  replicaUrl: string;
  /** Stop applying WAL on the replica: what it answers falls behind the primary (simulated lag). */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** Wait until the replica has applied everything the primary has written so far. */
  waitForReplay(timeoutMs?: number): Promise<void>;
  /** Shut the replica down (fast) / start it again and wait until it streams. */
  stopReplica(): Promise<void>;
  startReplica(): Promise<void>;
  /** Stop both servers and remove their directories. Safe to call twice. */
  stop(): Promise<void>;
}

interface Live {
  dir: string;
  dataDirs: string[];
}
/** SIGQUIT = immediate shutdown of a postmaster; synchronous, so usable from an 'exit' handler. */
function killNow(entry: Live): void {
  for (const dataDir of entry.dataDirs) {
    const pidFile = path.join(dataDir, 'postmaster.pid');
    if (!existsSync(pidFile)) continue;
    const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    try {
      if (pid > 0) process.kill(pid, 'SIGQUIT');
    } catch {
      // already gone
    }
  }
  rmSync(entry.dir, { recursive: true, force: true });
}

/** Run a PostgreSQL tool as the postgres OS user (initdb and the server refuse to run as root). */
async function asPostgres(tool: string, args: string[], timeoutMs = 120_000): Promise<string> {
  const cmd = path.join(PG_BIN, tool);
  const { stdout } =
    userInfo().uid === 0 ? await run('runuser', ['-u', 'postgres', '--', cmd, ...args], { timeout: timeoutMs }) : await run(cmd, args, { timeout: timeoutMs });
  return stdout;
}

/** The rows of one query on a fresh connection to `url`, closed after. */
export async function query<R extends pg.QueryResultRow>(url: string, text: string, params: unknown[] = [], connectionTimeoutMillis = 5000): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis });
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}

const serverSettings = (port: number, socketDir: string) =>
  [
    '',
    '# Strata test harness: throw-away server on loopback, durability traded for speed.',
    `port = ${port}`,
    `listen_addresses = '${HOST}'`,
    `unix_socket_directories = '${socketDir}'`,
    'wal_level = replica',
    'max_wal_senders = 5',
    'hot_standby = on',
    'fsync = off',
    'full_page_writes = off',
    'shared_buffers = 16MB',
    'max_connections = 30',
    '',
  ].join('\n');

async function startOnce(): Promise<PgReplicaHarness> {
  const dir = mkdtempSync(path.join(tmpdir(), 'strata-pg-replica-'));
  const primaryDir = path.join(dir, 'primary');
  const replicaDir = path.join(dir, 'replica');
  const entry: Live = { dir, dataDirs: [primaryDir, replicaDir] };
  const kill = cleanUpAtExit(() => killNow(entry));
  try {
    if (userInfo().uid === 0) {
      const { stdout } = await run('id', ['-u', 'postgres']);
      const uid = Number(stdout.trim());
      const { stdout: gidOut } = await run('id', ['-g', 'postgres']);
      chownSync(dir, uid, Number(gidOut.trim()));
    }
    const [primaryPort, replicaPort] = (await freePorts(2)) as [number, number];
    const primaryUrl = `postgres://postgres@${HOST}:${primaryPort}/postgres`;
    const replicaUrl = `postgres://postgres@${HOST}:${replicaPort}/postgres`;

    // initdb's trust pg_hba.conf already allows replication connections from 127.0.0.1.
    await asPostgres('initdb', ['-D', primaryDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C']);
    appendFileSync(path.join(primaryDir, 'postgresql.conf'), serverSettings(primaryPort, dir));
    await asPostgres('pg_ctl', ['-D', primaryDir, '-l', path.join(dir, 'primary.log'), '-w', '-t', '60', 'start']);

    // -R writes standby.signal and primary_conninfo; -X stream copies the WAL needed to start.
    await asPostgres('pg_basebackup', [
      '-h',
      HOST,
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      replicaDir,
      '-R',
      '-X',
      'stream',
      '-c',
      'fast',
      '--no-sync',
    ]);
    appendFileSync(path.join(replicaDir, 'postgresql.conf'), serverSettings(replicaPort, dir));

    const startReplica = async () => {
      await asPostgres('pg_ctl', ['-D', replicaDir, '-l', path.join(dir, 'replica.log'), '-w', '-t', '60', 'start']);
      await eventually(
        async () => (await query<{ state: string }>(primaryUrl, 'SELECT state FROM pg_stat_replication')).some((r) => r.state === 'streaming'),
        'the replica to stream',
        60_000,
      );
    };
    await startReplica();

    let stopping: Promise<void> | undefined;
    return {
      primaryUrl,
      replicaUrl,
      pauseReplay: async () => {
        await query(replicaUrl, 'SELECT pg_wal_replay_pause()');
        await eventually(
          async () => (await query<{ s: string }>(replicaUrl, 'SELECT pg_get_wal_replay_pause_state() AS s'))[0]!.s === 'paused',
          'replay to pause',
          30_000,
        );
      },
      resumeReplay: async () => {
        await query(replicaUrl, 'SELECT pg_wal_replay_resume()');
      },
      waitForReplay: async (timeoutMs = 30_000) => {
        const [{ lsn }] = (await query<{ lsn: string }>(primaryUrl, 'SELECT pg_current_wal_insert_lsn()::text AS lsn')) as [{ lsn: string }];
        await eventually(
          async () => (await query<{ done: boolean }>(replicaUrl, 'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done', [lsn]))[0]!.done,
          `the replica to replay up to ${lsn}`,
          timeoutMs,
        );
      },
      stopReplica: async () => {
        await asPostgres('pg_ctl', ['-D', replicaDir, '-m', 'fast', '-w', 'stop']);
      },
      startReplica,
      stop: () => {
        stopping ??= (async () => {
          for (const dataDir of [replicaDir, primaryDir]) {
            if (existsSync(path.join(dataDir, 'postmaster.pid'))) {
              await asPostgres('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
            }
          }
          kill();
        })();
        return stopping;
      },
    };
  } catch (err) {
    kill();
    throw err;
  }
}

/**
 * Start a throw-away PostgreSQL 15 primary (initdb in a temp dir, free port) and a streaming hot
 * standby made with `pg_basebackup -R`; resolves once the standby streams. The machine's own
 * server is not touched. Retries with new ports if one was taken meanwhile.
 */
export function startPgReplica(): Promise<PgReplicaHarness> {
  return startWithRetries(startOnce, 2);
}

/**
 * The primary + replica shared by every test file of this mocha run, started on first use and
 * stopped when the process exits. Tests that pause, stop or otherwise break the replica must use
 * startPgReplica() instead; tests sharing it should use their own schema or table names.
 */
export const sharedPgReplica = sharedPerRun(startPgReplica);
