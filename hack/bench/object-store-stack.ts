/**
 * Production-stack benchmark (prints figures; not a test), issue 3:
 *  1. 4 KiB PUT/GET ops/s through the gateway (SigV4 presigned requests driven by wrk, as in object-store.ts) for
 *     the standalone platform on its embedded defaults (PGlite, in-memory cache and broker) beside the
 *     same object store on the real servers: PostgreSQL (a fresh database on the machine's server,
 *     plus a throw-away streaming replica with BENCH_PG_REPLICA=1), a throw-away 3-master Redis
 *     Cluster and the machine's RabbitMQ.
 *  2. The outbox's cost: PUT ops/s on the real stack with events on vs off. "Off" turns the outbox
 *     INSERT of the commit transaction into a no-op (a BEFORE INSERT trigger that drops the row; its
 *     own small cost counts against "off"), so no event is written,
 *     relayed or consumed while the code path stays the same; "on" is measured before and after it
 *     and averaged, so that the growing tables favour neither.
 *  3. A RabbitMQ outage drill: RabbitMQ is cut (TCP fault proxy between the services and the broker;
 *     the machine's server is not touched) for BENCH_OUTAGE_SECONDS (default 20; the issue's target
 *     speaks of 60) under a steady PUT load at half the measured PUT rate; the outbox backlog grows,
 *     then the broker comes back and the time until the backlog is published (and until the consumer
 *     applied every event) is printed, load still running.
 *
 *   npm run bench:object-store-stack     (BENCH_SECONDS=6 BENCH_CONNECTIONS=16 BENCH_OUTAGE_SECONDS=20)
 *   BENCH_ONLY=drill BENCH_OUTAGE_SECONDS=60 BENCH_DRILL_RATE=20 npm run bench:object-store-stack
 *                                         (the issue's 60 s outage, without the ops/s runs)
 *   BENCH_REAL_TOPOLOGY=standalone|services: the real stack as the standalone process on the servers
 *   (default when images/standalone reads STRATA_PG_URL...) or as the three service containers'
 *   entrypoints (control plane, data plane, gateway) as separate processes.
 *   BENCH_ONLY=outbox: only the real stack's events on/off PUT runs (no embedded stack, GET or drill).
 *   BENCH_OUTBOX_RUNS=on,off,on,off,on: the order of those runs (e.g. `on,on` for a profile).
 *   BENCH_CPU_PROF=<dir>: the real stack's processes write V8 CPU profiles (node --cpu-prof) there.
 *
 * Beside ops/s, each events on/off run prints the CPU time per PUT (load-independent, unlike ops/s
 * on a shared machine) of the stack's processes and of the PostgreSQL backends serving the bench
 * database, counted from the run's start until the outbox is published and every event applied.
 */
import amqp from 'amqplib';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { CONTROL_PLANE_QUEUE } from '../../images/control-plane/src/events/consumer.js';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/pg.js';
import { startPgReplica, type PgReplicaHarness } from '../../test/support/pg-replica.js';
import { startRedisCluster, type RedisClusterHarness } from '../../test/support/redis-cluster.js';
import { startTcpProxy, type TcpFaultProxy } from '../../test/support/tcp-proxy.js';
import { runWrk, type WrkFigure } from './wrk.js';
import { cpuDelta, cpuSnapshot, ROOT, startServices, startStandalone, standaloneReadsProductionEnv, type RealServers, type Stack } from './stacks.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const OUTAGE_S = Number(process.env.BENCH_OUTAGE_SECONDS ?? 20);
/** How long the drill waits for the drain (past the target's 30 s, so "not met" still says by how much). */
const DRAIN_LIMIT_S = 45;
/** BENCH_ONLY=drill: only the outage drill (at BENCH_DRILL_RATE PUT/s, default 20), e.g. with BENCH_OUTAGE_SECONDS=60. */
const DRILL_ONLY = process.env.BENCH_ONLY === 'drill';
const OUTBOX_ONLY = process.env.BENCH_ONLY === 'outbox';
const OUTBOX_RUNS = (process.env.BENCH_OUTBOX_RUNS ?? 'on,off,on,off,on').split(',').map((r) => r.trim() === 'off');
const SMALL = 4096;
const AMQP_URL = process.env.STRATA_TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface OpsFigure {
  opsPerSec: number;
  p50: number;
  p99: number;
  errors: number;
  /** 2xx answers in the run. */
  ok?: number;
  /** CPU ms per PUT: the stack's processes, and the PostgreSQL backends of the bench database. */
  cpuMs?: { stack: number; pg: number; rabbit: number };
}

function figure(r: WrkFigure): OpsFigure {
  return { opsPerSec: r.opsPerSec, p50: r.p50, p99: r.p99, errors: r.errors, ok: r.ok };
}

/** CPU time per PUT, events on vs off (the load-independent form of the outbox's cost). */
function cpuLines(on: OpsFigure, off: OpsFigure): string[] {
  if (!on.cpuMs || !off.cpuMs) return [];
  const onMs = on.cpuMs.stack + on.cpuMs.pg;
  const offMs = off.cpuMs.stack + off.cpuMs.pg;
  const onR = onMs + on.cpuMs.rabbit;
  const offR = offMs + off.cpuMs.rabbit;
  return [
    `  CPU per PUT, stack + PostgreSQL: ${onMs.toFixed(2)} ms on (${on.cpuMs.stack.toFixed(2)} + ${on.cpuMs.pg.toFixed(2)}) vs ${offMs.toFixed(2)} ms ` +
      `off (${off.cpuMs.stack.toFixed(2)} + ${off.cpuMs.pg.toFixed(2)}): +${((onMs / offMs - 1) * 100).toFixed(1)} %, i.e. a CPU-bound machine loses ` +
      `${((1 - offMs / onMs) * 100).toFixed(1)} % of its PUT ops/s`,
    `  with the machine's RabbitMQ (shared with other users; ${on.cpuMs.rabbit.toFixed(2)} vs ${off.cpuMs.rabbit.toFixed(2)} ms per PUT): ` +
      `${onR.toFixed(2)} vs ${offR.toFixed(2)} ms, a CPU-bound machine loses ${((1 - offR / onR) * 100).toFixed(1)} %`,
  ];
}

function mean(runs: OpsFigure[]): OpsFigure {
  const avg = (f: (r: OpsFigure) => number) => runs.reduce((a, r) => a + f(r), 0) / runs.length;
  const cpu = runs.every((r) => r.cpuMs) ? { stack: avg((r) => r.cpuMs!.stack), pg: avg((r) => r.cpuMs!.pg), rabbit: avg((r) => r.cpuMs!.rabbit) } : undefined;
  return {
    opsPerSec: avg((r) => r.opsPerSec),
    p50: avg((r) => r.p50),
    p99: Math.max(...runs.map((r) => r.p99)),
    errors: runs.reduce((a, r) => a + r.errors, 0),
    cpuMs: cpu,
  };
}

/** Signed 4 KiB GET and PUT workloads against one stack (PUT cycles over 1000 new keys per run, one body for all). */
class Workload {
  private run = 0;
  readonly small = randomBytes(SMALL);

  constructor(readonly origin: string) {}

  sign(method: string, p: string): string {
    return presignUrl({ method, origin: this.origin, path: p, accessKey: ROOT.user, secret: ROOT.password, region: 'us-east-1', expiresSeconds: 3600 });
  }

  async prepare(): Promise<void> {
    if (!(await fetch(this.sign('PUT', '/bench'), { method: 'PUT' })).ok) throw new Error('could not create the bench bucket');
    if (!(await fetch(this.sign('PUT', '/bench/small.bin'), { method: 'PUT', body: this.small })).ok) throw new Error('could not seed small.bin');
  }

  async get(seconds = SECONDS): Promise<OpsFigure> {
    return figure(
      await runWrk({
        origin: this.origin,
        method: 'GET',
        targets: [this.sign('GET', '/bench/small.bin').slice(this.origin.length)],
        seconds,
        connections: CONNECTIONS,
      }),
    );
  }

  async put(seconds = SECONDS): Promise<OpsFigure> {
    const run = this.run++;
    const targets = Array.from({ length: 1000 }, (_, i) => this.sign('PUT', `/bench/r${run}/${i}.bin`).slice(this.origin.length));
    return figure(await runWrk({ origin: this.origin, method: 'PUT', targets, body: this.small, bodies: 'one', seconds, connections: CONNECTIONS }));
  }

  /** PUTs at a steady rate until stop() says so (the drill's background load). */
  async steadyPuts(rate: number, stop: () => boolean): Promise<{ ok: number; failed: number }> {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    const counts = { ok: 0, failed: 0 };
    const inflight = new Set<Promise<void>>();
    const interval = 1000 / rate;
    let next = performance.now();
    for (let n = 0; !stop(); n++) {
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
      next += interval;
      if (inflight.size >= 64) await Promise.race(inflight);
      const url = new URL(this.sign('PUT', `/bench/drill/${n}.bin`));
      const p = new Promise<void>((resolve) => {
        const req = http.request(
          { host: url.hostname, port: url.port, path: url.pathname + url.search, method: 'PUT', agent, headers: { 'content-length': SMALL } },
          (res) => {
            res.resume();
            res.on('end', () => {
              if (res.statusCode === 200) counts.ok++;
              else counts.failed++;
              resolve();
            });
          },
        );
        req.on('error', () => {
          counts.failed++;
          resolve();
        });
        req.end(this.small);
      }).finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await Promise.all(inflight);
    agent.destroy();
    return counts;
  }
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-bench-stack-'));
  const tag = randomBytes(4).toString('hex');
  let db: TestDatabase | undefined;
  let replica: PgReplicaHarness | undefined;
  let redis: RedisClusterHarness | undefined;
  let proxy: TcpFaultProxy | undefined;
  let admin: pg.Client | undefined;
  let stack: Stack | undefined;
  const real: Partial<RealServers> = { exchange: `strata.bench.${tag}.events`, queuePrefix: `strata.bench.${tag}.`, keyPrefix: `bench-${tag}:` };
  const out: string[] = [];
  const log = (line: string) => {
    out.push(line);
    process.stderr.write(`${line}\n`);
  };
  try {
    // 1. Standalone, embedded defaults.
    let sGet: OpsFigure | undefined;
    let sPut: OpsFigure | undefined;
    if (!DRILL_ONLY && !OUTBOX_ONLY) {
      log('standalone (embedded) ...');
      stack = await startStandalone(work);
      const embedded = new Workload(stack.origin);
      await embedded.prepare();
      await embedded.get(2);
      await embedded.put(2);
      sGet = await embedded.get();
      sPut = await embedded.put();
      await stack.stop();
      stack = undefined;
    }

    // 2. The real servers.
    log('real servers ...');
    if (process.env.BENCH_PG_REPLICA === '1') {
      replica = await startPgReplica();
      real.pgUrl = replica.primaryUrl;
      real.replicaUrls = [replica.replicaUrl];
    } else {
      db = await createTestDatabase('strata_bench');
      real.pgUrl = db.url;
      real.replicaUrls = [];
    }
    redis = await startRedisCluster();
    real.redisNodes = redis.nodes.map((n) => `${n.host}:${n.port}`).join(',');
    const target = new URL(AMQP_URL);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5672) });
    const viaProxy = new URL(AMQP_URL);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    real.amqpUrl = viaProxy.toString();
    const servers = real as RealServers;
    const topology = process.env.BENCH_REAL_TOPOLOGY ?? ((await standaloneReadsProductionEnv()) ? 'standalone' : 'services');
    stack = topology === 'standalone' ? await startStandalone(work, servers) : await startServices(work, servers);
    admin = new pg.Client({ connectionString: servers.pgUrl });
    await admin.connect();
    const db1 = admin;
    const count = async (q: string) => Number((await db1.query<{ n: number }>(q)).rows[0]!.n);
    const production = new Workload(stack.origin);
    await production.prepare();
    await production.get(2);
    // A full-length PUT warm-up: after a 2 s one the first measured run (events on) still paid for
    // the process warming up (JIT, pools, caches): up to 1.8x the CPU per PUT of the runs after it.
    await production.put(DRILL_ONLY ? 2 : SECONDS);
    // Planner statistics for the tables the warm-up filled (autovacuum would get there within a minute).
    await admin.query('ANALYZE');
    const rGet = DRILL_ONLY || OUTBOX_ONLY ? undefined : await production.get();
    // on, off, on, off, on: alternating runs, so that drift (growing tables, other load) favours neither.
    const onRuns: OpsFigure[] = [];
    const offRuns: OpsFigure[] = [];
    const unsentNow = () => count('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL');
    const unappliedNow = () => count('SELECT (SELECT count(*) FROM outbox) - (SELECT count(*) FROM processed_events) AS n');
    const settle = async () => {
      for (const until = Date.now() + 60_000; Date.now() < until; await sleep(100)) {
        if ((await unsentNow()) === 0 && (await unappliedNow()) <= 0) return;
      }
    };
    await settle();
    await admin.query('CREATE OR REPLACE FUNCTION strata_bench_drop_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$');
    for (const off of DRILL_ONLY ? [] : OUTBOX_RUNS) {
      // A BEFORE INSERT trigger that drops the row (a rule would not apply to the commit's data-modifying CTE).
      if (off) await admin.query('CREATE TRIGGER strata_bench_events_off BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION strata_bench_drop_row()');
      try {
        const before = await cpuSnapshot(stack, admin);
        const run = await production.put();
        // The run's events are published and applied after it: their CPU counts against it.
        await settle();
        const after = await cpuSnapshot(stack, admin);
        const n = Math.max(1, run.ok ?? 0);
        run.cpuMs = {
          stack: (cpuDelta(before.stack, after.stack) * 1000) / n,
          pg: (cpuDelta(before.pg, after.pg) * 1000) / n,
          rabbit: (cpuDelta(before.rabbit, after.rabbit) * 1000) / n,
        };
        (off ? offRuns : onRuns).push(run);
        log(
          `  events ${off ? 'off' : 'on '}: ${Math.round(run.opsPerSec)} PUT/s, CPU per PUT ${run.cpuMs.stack.toFixed(2)} ms stack + ` +
            `${run.cpuMs.pg.toFixed(2)} ms PostgreSQL [+ ${run.cpuMs.rabbit.toFixed(2)} ms RabbitMQ, shared] (load average ${os
              .loadavg()
              .map((l) => l.toFixed(1))
              .join(' ')})`,
        );
      } finally {
        if (off) await admin.query('DROP TRIGGER strata_bench_events_off ON outbox');
      }
    }
    const loadAfterRuns = os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ');
    const rPutOn = onRuns.length ? mean(onRuns) : undefined;
    const rPutOff = offRuns.length ? mean(offRuns) : undefined;
    const objects = await count("SELECT count(*)::int AS n FROM object_info WHERE state = 'NORMAL'");

    if (OUTBOX_ONLY) {
      const ms = (f: OpsFigure) =>
        f.cpuMs
          ? `, CPU per PUT ${f.cpuMs.stack.toFixed(2)} ms stack + ${f.cpuMs.pg.toFixed(2)} ms PostgreSQL [+ ${f.cpuMs.rabbit.toFixed(2)} ms in the ` +
            `machine's RabbitMQ, shared with other users]`
          : '';
      const lines = [
        '',
        `real stack PUT 4 KiB, ${CONNECTIONS} connections, ${SECONDS} s per run (load average ${os
          .loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')})`,
        ...(rPutOn ? [`  events on:  ${Math.round(rPutOn.opsPerSec)} ops/s (runs ${onRuns.map((f) => Math.round(f.opsPerSec)).join(', ')})${ms(rPutOn)}`] : []),
        ...(rPutOff
          ? [`  events off: ${Math.round(rPutOff.opsPerSec)} ops/s (runs ${offRuns.map((f) => Math.round(f.opsPerSec)).join(', ')})${ms(rPutOff)}`]
          : []),
      ];
      if (rPutOn && rPutOff) {
        lines.push(`  outbox cost: ${((1 - rPutOn.opsPerSec / rPutOff.opsPerSec) * 100).toFixed(1)} % of PUT ops/s`);
        lines.push(...cpuLines(rPutOn, rPutOff));
      }
      console.log(lines.join('\n'));
      return;
    }

    // 3. Outage drill: cut RabbitMQ under a steady load, bring it back, time the drain.
    log(`outage drill (${OUTAGE_S} s) ...`);
    await sleep(2000);
    const unsent = () => count('SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL');
    const unapplied = () => count('SELECT count(*)::int AS n FROM outbox o WHERE NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.event_id = o.event_id)');
    const rate = Number(process.env.BENCH_DRILL_RATE ?? 0) || (rPutOn ? Math.max(10, Math.round(rPutOn.opsPerSec / 2)) : 20);
    // Start from an empty outbox (the runs above may have left a backlog the relay is still sending).
    for (const until = Date.now() + 30_000; Date.now() < until && (await unsent()) > 0; ) await sleep(200);
    let loadOn = true;
    const load = production.steadyPuts(rate, () => !loadOn);
    // Under a steady load a few events are always on their way (committed, not yet confirmed or
    // applied): "drained" means back to that level, at most half a second of the load's events.
    let before = 0;
    for (let i = 0; i < 10; i++) {
      await sleep(200);
      before = Math.max(before, await unsent(), await unapplied());
    }
    const settled = Math.max(before, Math.ceil(rate / 2));
    proxy.cut();
    const cutAt = Date.now();
    await sleep(OUTAGE_S * 1000);
    const peak = await unsent();
    proxy.restore();
    const restoredAt = Date.now();
    let drainedS: number | undefined;
    let appliedS: number | undefined;
    // The backlog keeps growing (load goes on) until the relay's publisher has reconnected.
    let resumedS: number | undefined;
    let highest = peak;
    while ((drainedS === undefined || appliedS === undefined) && Date.now() - restoredAt < DRAIN_LIMIT_S * 1000) {
      const left = await unsent();
      if (resumedS === undefined && left < highest) resumedS = (Date.now() - restoredAt) / 1000;
      highest = Math.max(highest, left);
      if (drainedS === undefined && left <= settled) drainedS = (Date.now() - restoredAt) / 1000;
      if (appliedS === undefined && (await unapplied()) <= settled) appliedS = (Date.now() - restoredAt) / 1000;
      await sleep(100);
    }
    loadOn = false;
    const drill = await load;
    const outageS = (restoredAt - cutAt) / 1000;
    // Net drain rate (published minus what the load adds meanwhile), for an estimate of the 60 s case.
    const netRate = drainedS !== undefined && resumedS !== undefined && drainedS > resumedS ? highest / (drainedS - resumedS) : undefined;
    const estimate60 = OUTAGE_S < 60 && netRate ? (resumedS ?? 0) + (highest * 60) / OUTAGE_S / netRate : undefined;
    const eventsTotal = await count("SELECT count(*)::int AS n FROM outbox WHERE type = 'object.created'");
    const processed = await count("SELECT count(*)::int AS n FROM processed_events WHERE type = 'object.created'");

    // Report.
    const r0 = (n: number) => Math.round(n).toString();
    const pct = (a: number, b: number) => `${((a / b) * 100).toFixed(0)} %`;
    const ops = (f: OpsFigure) => `${r0(f.opsPerSec)} ops/s (p50 ${f.p50.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms${f.errors ? `, ${f.errors} errors` : ''})`;
    const realName = topology === 'standalone' ? 'standalone process on the servers' : 'control plane + data plane + gateway as 3 processes';
    const yes = (ok: boolean) => (ok ? 'met' : 'NOT met');
    const perf = (sGet: OpsFigure, sPut: OpsFigure, rGet: OpsFigure, rPutOn: OpsFigure, rPutOff: OpsFigure) => {
      const outboxCost = 1 - rPutOn.opsPerSec / rPutOff.opsPerSec;
      const lines = [
        '| operation | standalone (embedded: PGlite, in-memory cache and broker) | real stack | real / standalone |',
        '|---|---|---|---|',
        `| GET 4 KiB | ${ops(sGet)} | ${ops(rGet)} | ${pct(rGet.opsPerSec, sGet.opsPerSec)} |`,
        `| PUT 4 KiB | ${ops(sPut)} | ${ops(rPutOn)} | ${pct(rPutOn.opsPerSec, sPut.opsPerSec)} |`,
        '',
        '| real stack PUT 4 KiB | events on (outbox → RabbitMQ → consumer) | events off (no outbox row) | outbox cost |',
        '|---|---|---|---|',
        `| mean of alternating runs | ${ops(rPutOn)} (runs: ${onRuns.map((f) => r0(f.opsPerSec)).join(', ')}) | ${ops(rPutOff)} (runs: ` +
          `${offRuns.map((f) => r0(f.opsPerSec)).join(', ')}) | ${(outboxCost * 100).toFixed(1)} % |`,
        '',
        ...cpuLines(rPutOn, rPutOff),
        `  (load average at the end of the runs: ${loadAfterRuns})`,
        '',
      ];
      return { outboxCost, lines };
    };
    const measured = sGet && sPut && rGet && rPutOn && rPutOff ? perf(sGet, sPut, rGet, rPutOn, rPutOff) : undefined;
    const report = [
      '',
      `Strata object store on its production servers — ${os.cpus().length} cores shared with other work, loopback, ${CONNECTIONS} connections, ` +
        `${SECONDS} s per run, 4 KiB bodies, SigV4 presigned requests`,
      `real stack: ${realName}; PostgreSQL 15 ` +
        `(${servers.replicaUrls.length ? 'throw-away primary + streaming replica' : "the machine's server, one fresh database"}), Redis Cluster (3 ` +
        `masters), RabbitMQ (the machine's, through a TCP fault proxy)`,
      '',
      ...(measured?.lines ?? []),
      `RabbitMQ outage drill: cut for ${outageS.toFixed(1)} s under ${rate} PUT/s (${drill.ok} PUTs answered 200, ${drill.failed} failed during the drill)`,
      `  outbox backlog ${before} at most before the cut (events in flight) → ${peak} when RabbitMQ came back; "drained" = back to ≤ ${settled}`,
      `  backlog published ${drainedS === undefined ? `NOT within ${DRAIN_LIMIT_S} s` : `${drainedS.toFixed(1)} s`} after RabbitMQ returned ` +
        `(publishing resumed after ${resumedS?.toFixed(1) ?? '?'} s, the reconnect backoff; highest backlog ${highest}); every event applied by the ` +
        `consumer ${appliedS === undefined ? `NOT within ${DRAIN_LIMIT_S} s` : `after ${appliedS.toFixed(1)} s`} (load still running)`,
      ...(estimate60 === undefined
        ? []
        : [
            `  a 60 s outage (backlog ~${Math.round((highest * 60) / OUTAGE_S)}) at the measured net drain rate of ${Math.round(netRate!)} events/s: ` +
              `~${estimate60.toFixed(0)} s (estimate, not measured)`,
          ]),
      `  object.created events written ${eventsTotal}, applied ${processed}; NORMAL objects before the drill ${objects}`,
      '',
      'Targets (issue 3):',
      ...(sGet && sPut && rGet && rPutOn && measured
        ? [
            `  real stack ≥ 60 % of standalone ops/s: GET ${pct(rGet.opsPerSec, sGet.opsPerSec)} ${yes(rGet.opsPerSec >= 0.6 * sGet.opsPerSec)}, PUT ` +
              `${pct(rPutOn.opsPerSec, sPut.opsPerSec)} ${yes(rPutOn.opsPerSec >= 0.6 * sPut.opsPerSec)}`,
            `  outbox costs ≤ 15 % of PUT ops/s: ${(measured.outboxCost * 100).toFixed(1)} % ${yes(measured.outboxCost <= 0.15)}`,
          ]
        : []),
      `  backlog of a ${OUTAGE_S} s outage drains within 30 s: ${drainedS === undefined ? 'NOT met' : `${drainedS.toFixed(1)} s ${yes(drainedS <= 30)}`}` +
        (estimate60 !== undefined
          ? `; the target's 60 s outage: ~${estimate60.toFixed(0)} s estimated ${yes(estimate60 <= 30)} (BENCH_OUTAGE_SECONDS=60 measures it)`
          : ''),
      '',
    ];
    console.log(report.join('\n'));
  } finally {
    await stack?.stop().catch(() => undefined);
    await admin?.end().catch(() => undefined);
    await proxy?.close().catch(() => undefined);
    await redis?.stop().catch(() => undefined);
    await replica?.stop().catch(() => undefined);
    await db?.drop().catch(() => undefined);
    await removeRabbitNames(real.exchange!, `${real.queuePrefix}${CONTROL_PLANE_QUEUE}`).catch((err) =>
      console.error('could not remove the bench exchange/queue', err),
    );
    await rm(work, { recursive: true, force: true });
  }
}

async function removeRabbitNames(exchange: string, queue: string): Promise<void> {
  const connection = await amqp.connect(AMQP_URL);
  try {
    const channel = await connection.createChannel();
    await channel.deleteQueue(queue);
    await channel.deleteExchange(exchange);
    await channel.close();
  } finally {
    await connection.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
