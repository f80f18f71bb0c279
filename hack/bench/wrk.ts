import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/**
 * The benchmarks' HTTP load client: wrk (C, epoll), driven by a Lua script that cycles through a
 * list of request targets (paths with their query, e.g. SigV4 presigned URLs, one key each) and
 * sends PUT bodies that are either one body for all or a different body on every request (the
 * body with the thread's number and the request's count written over its first 16 bytes).
 *
 * Thread k of T sends targets k, k + T, k + 2T, ...: the threads never write the same key at the
 * same moment. A run that measured anything but 2xx answers measured the wrong thing: wrk counts
 * the answers above 399 (a Lua response() hook would see every status, but makes wrk hand each
 * answer to Lua, about a quarter more client CPU per request), and checkTargets sends each target
 * once beforehand and requires a 2xx, which rules out the 1xx/3xx a run could meet. Any error
 * status, socket error or timeout makes runWrk reject unless `allowErrors` is set.
 */
export interface WrkOptions {
  /** Origin of the server, e.g. http://127.0.0.1:9000 (wrk's Host header is taken from it). */
  origin: string;
  method: 'GET' | 'PUT';
  /** Request targets (path and query), cycled; at least one. */
  targets: string[];
  /** PUT only: the body, sent as it is ('one') or with its first 16 bytes made unique per request ('distinct'). */
  body?: Buffer;
  bodies?: 'one' | 'distinct';
  seconds: number;
  connections: number;
  /** wrk threads (default 2: one per core here; more threads than cores only add switches). */
  threads?: number;
  /** Resolve with the error counts instead of rejecting (a load run whose failures are the subject). */
  allowErrors?: boolean;
}

export interface WrkFigure {
  opsPerSec: number;
  requests: number;
  /** Answers below 400 (2xx, given checkTargets). */
  ok: number;
  /** Answers above 399, socket errors and timeouts. */
  errors: number;
  p50: number;
  p99: number;
  /** CPU ms (user + system) the wrk process spent per request: the client's own cost. */
  clientCpuMs: number;
}

const SCRIPT = String.raw`
local threads = {}
local started = 0
function setup(thread)
  thread:set("id", started)
  started = started + 1
  table.insert(threads, thread)
end

local heads, body, tail, distinct
local cursor, step, sent = 0, 1, 0

function init(args)
  local method, targetsFile, bodyFile, mode = args[1], args[2], args[3], args[4]
  step = tonumber(args[5])
  cursor = id
  distinct = mode == "distinct" and bodyFile ~= "-"
  body = ""
  if bodyFile ~= "-" then
    local f = assert(io.open(bodyFile, "rb"))
    body = f:read("*a")
    f:close()
  end
  tail = body:sub(17)
  heads = {}
  local host = wrk.headers["Host"]
  local length = bodyFile ~= "-" and ("Content-Length: " .. #body .. "\r\n") or ""
  for target in io.lines(targetsFile) do
    heads[#heads + 1] = method .. " " .. target .. " HTTP/1.1\r\nHost: " .. host .. "\r\n" .. length .. "\r\n"
  end
end

function request()
  local head = heads[cursor % #heads + 1]
  cursor = cursor + step
  if distinct then
    sent = sent + 1
    return head .. string.format("%08x%08x", id, sent) .. tail
  end
  return head .. body
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_RESULT {"requests":%d,"durationUs":%d,"p50Us":%d,"p99Us":%d,"status":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.status, e.connect, e.read, e.write, e.timeout))
end
`;

interface WrkResult {
  requests: number;
  durationUs: number;
  p50Us: number;
  p99Us: number;
  /** Answers with a status above 399. */
  status: number;
  connect: number;
  read: number;
  write: number;
  timeout: number;
}

const TICK_MS = 10; // /proc counts CPU time in clock ticks (USER_HZ = 100 on Linux)

/** CPU ms of this process's exited, waited-for children such as wrk and curl (/proc/self/stat cutime + cstime). */
export async function childrenCpuMs(): Promise<number> {
  const stat = await readFile('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) * TICK_MS;
}

export async function runWrk(o: WrkOptions): Promise<WrkFigure> {
  if (!o.targets.length) throw new Error('wrk: no targets');
  const threads = Math.min(o.threads ?? 2, o.connections);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'strata-wrk-'));
  try {
    const script = path.join(dir, 'cycle.lua');
    const targets = path.join(dir, 'targets');
    const bodyFile = o.body ? path.join(dir, 'body') : '-';
    await writeFile(script, SCRIPT);
    await writeFile(targets, o.targets.join('\n') + '\n');
    if (o.body) await writeFile(bodyFile, o.body);
    const args = [
      '-t',
      String(threads),
      '-c',
      String(o.connections),
      '-d',
      `${o.seconds}s`,
      '--timeout',
      '30s',
      '-s',
      script,
      o.origin,
      '--',
      o.method,
      targets,
      bodyFile,
      o.bodies ?? 'one',
      String(threads),
    ];
    const cpu0 = await childrenCpuMs();
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout.on('data', (c: Buffer) => (text += c.toString()));
      child.stderr.on('data', (c: Buffer) => (text += c.toString()));
      child.on('error', reject);
      child.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited with ${code}: ${text}`))));
    });
    const clientMs = (await childrenCpuMs()) - cpu0;
    const line = out.split('\n').find((l) => l.startsWith('WRK_RESULT '));
    if (!line) throw new Error(`wrk printed no result: ${out}`);
    const r = JSON.parse(line.slice('WRK_RESULT '.length)) as WrkResult;
    const errors = r.status + r.connect + r.read + r.write + r.timeout;
    if (errors && !o.allowErrors) {
      throw new Error(
        `wrk ${o.method} ${o.origin}: ${r.status} of ${r.requests} answers 4xx/5xx, socket errors connect ${r.connect} read ${r.read} write ${r.write} ` +
          `timeout ${r.timeout}`,
      );
    }
    return {
      opsPerSec: r.requests / (r.durationUs / 1e6),
      requests: r.requests,
      ok: r.requests - r.status,
      errors,
      p50: r.p50Us / 1000,
      p99: r.p99Us / 1000,
      clientCpuMs: clientMs / Math.max(1, r.requests),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Send each target once (`concurrency` at a time) and require a 2xx without following redirects;
 * with a PUT body this is also how the keys of a run are created. GET answers must carry
 * `expectBytes` bytes when given.
 */
export async function checkTargets(o: {
  origin: string;
  method: 'GET' | 'PUT';
  targets: string[];
  body?: Buffer;
  expectBytes?: number;
  concurrency?: number;
}): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < o.targets.length) {
      const target = o.targets[next++]!;
      const res = await fetch(o.origin + target, { method: o.method, body: o.body ? new Uint8Array(o.body) : undefined, redirect: 'manual' });
      const bytes = (await res.arrayBuffer()).byteLength;
      if (res.status < 200 || res.status > 299) throw new Error(`${o.method} ${target.split('?')[0]} answered ${res.status}`);
      if (o.expectBytes !== undefined && bytes !== o.expectBytes)
        throw new Error(`${o.method} ${target.split('?')[0]}: ${bytes} bytes, expected ${o.expectBytes}`);
    }
  };
  await Promise.all(Array.from({ length: o.concurrency ?? 16 }, worker));
}
