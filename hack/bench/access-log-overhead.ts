/**
 * What server access logging costs a request to a bucket that does not log (the common case): the gateway's
 * first middleware (request context) and a small answer, with and without the access-log recorder in front,
 * one process, A/B rounds alternating under wrk. Server CPU per request from process.cpuUsage() of this process
 * (wrk runs apart). The recorder's bucket lookup finds the record the handler resolved, as in the gateway.
 *
 *   npx tsx hack/bench/access-log-overhead.ts            (BENCH_SECONDS=5 per round, BENCH_ROUNDS=3 pairs)
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, createLogger, createRegistry, runChain, type ChainHandler } from '../../images/service-kit/src/index.js';
import { AccessLogDelivery, DEFAULT_ACCESS_LOG_SETTINGS } from '../../images/gateway/src/access-log/delivery.js';
import { accessLogRecorder } from '../../images/gateway/src/access-log/recorder.js';
import { state } from '../../images/gateway/src/context.js';
import { BucketAccess } from '../../images/gateway/src/middleware/bucket-access.js';
import { requestContext } from '../../images/gateway/src/middleware/request-context.js';
import { trustedProxies } from '../../images/service-kit/src/trusted-proxies.js';
import type { BucketInfo, ObjectLayer } from '../../images/object-model/src/index.js';
import { runWrk } from './wrk.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BODY = Buffer.alloc(4096, 'x');

async function server(withRecorder: boolean): Promise<{ origin: string; close(): Promise<void> }> {
  const registry = createRegistry('bench', false);
  const logger = createLogger('bench', 'silent');
  const counters = {
    bytesIn: new Counter({ name: 'b_in', help: 'in', labelNames: ['operation'] as const, registers: [registry] }),
    bytesOut: new Counter({ name: 'b_out', help: 'out', labelNames: ['operation'] as const, registers: [registry] }),
  };
  const record: BucketInfo = { name: 'bench', owner: 'alice', createdAt: new Date().toISOString(), backend: { kind: 'fs' } };
  const buckets = new BucketAccess({ getBucket: async () => record }, 2000);
  const objects = { putObject: async () => Promise.reject(new Error('no log writes in this bench')) } as unknown as ObjectLayer;
  const delivery = new AccessLogDelivery(objects, (n) => buckets.existing(n), 'us-east-1', DEFAULT_ACCESS_LOG_SETTINGS, logger, registry);
  const answer: ChainHandler = (_req, res) => {
    const st = state(res);
    st.operation = 'GetObject';
    st.bucket = 'bench';
    st.key = 'k';
    void buckets.existing('bench').then(() => {
      res.setHeader('Content-Length', BODY.length);
      res.end(BODY);
    });
  };
  const chain: ChainHandler[] = [requestContext(logger, counters), ...(withRecorder ? [accessLogRecorder(buckets, delivery, trustedProxies())] : []), answer];
  const s = http.createServer((req, res) => runChain(chain, req, res, () => res.destroy()));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    origin: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
    close: async () => {
      await delivery.close();
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    },
  };
}

async function round(withRecorder: boolean): Promise<{ ops: number; cpuUsPerReq: number }> {
  const s = await server(withRecorder);
  try {
    await runWrk({ origin: s.origin, method: 'GET', targets: ['/bench/k'], seconds: 1, connections: 16 });
    const before = process.cpuUsage();
    const fig = await runWrk({ origin: s.origin, method: 'GET', targets: ['/bench/k'], seconds: SECONDS, connections: 16 });
    const cpu = process.cpuUsage(before);
    return { ops: fig.opsPerSec, cpuUsPerReq: (cpu.user + cpu.system) / fig.requests };
  } finally {
    await s.close();
  }
}

const rows: string[] = [];
for (let i = 0; i < ROUNDS; i++) {
  for (const withRecorder of i % 2 === 0 ? [false, true] : [true, false]) {
    const r = await round(withRecorder);
    rows.push(`| ${i + 1} | ${withRecorder ? 'with recorder' : 'without'} | ${Math.round(r.ops)} | ${r.cpuUsPerReq.toFixed(1)} |`);
  }
}
console.log('| pair | chain | GET/s | server CPU µs/request |\n|---|---|---|---|\n' + rows.join('\n'));
