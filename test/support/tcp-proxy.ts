import net from 'node:net';

export interface TcpFaultProxy {
  /** Port the proxy listens on (127.0.0.1). */
  port: number;
  /** Simulated outage: destroy every open connection and drop new ones as soon as they arrive. */
  cut(): void;
  /**
   * Silent network: connections stay open but no byte moves either way, and new ones are accepted
   * and left hanging (a dead peer or a black-holed route, which only timeouts and heartbeats detect).
   */
  stall(): void;
  /**
   * From the moment a client sends bytes that contain `marker` (a statement's text), every answer is
   * held back, on every connection, new ones included, while what clients send still reaches the
   * server: a server that ran the statement and then froze, or a lost way back. Resolves when it happened.
   */
  holdRepliesAfter(marker: string): Promise<void>;
  /** End the outage: accept and forward again (connections left hanging by stall() are dropped). */
  restore(): void;
  /** Connections currently forwarded. */
  readonly openConnections: number;
  /** Stop listening and destroy everything. */
  close(): Promise<void>;
}

/**
 * A TCP forwarder to a real server with an off switch, so a test can take RabbitMQ or PostgreSQL
 * "down" for its own client without touching the machine's shared server. While cut, the proxy keeps
 * its port (nothing else can take it) and resets each new connection at once, which clients see as
 * a refused or dropped connection; while stalled, nothing moves and nothing closes.
 */
export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpFaultProxy> {
  const host = target.host ?? '127.0.0.1';
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  const hanging = new Set<net.Socket>();
  let mode: 'up' | 'cut' | 'stalled' | 'holding' = 'up';
  let watch: { marker: Buffer; seen: () => void } | undefined;
  const holdReplies = () => {
    mode = 'holding';
    for (const { client, upstream } of pairs) {
      upstream.unpipe(client);
      upstream.pause();
    }
  };

  const server = net.createServer((client) => {
    if (mode === 'cut') {
      client.resetAndDestroy();
      return;
    }
    if (mode === 'stalled') {
      hanging.add(client);
      client.on('error', () => undefined);
      client.on('close', () => hanging.delete(client));
      return;
    }
    const upstream = net.connect({ host, port: target.port });
    const pair = { client, upstream };
    pairs.add(pair);
    const teardown = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', teardown);
    upstream.on('error', teardown);
    client.on('close', teardown);
    upstream.on('close', teardown);
    client.on('data', (chunk: Buffer) => {
      if (!watch || !chunk.includes(watch.marker)) return;
      const { seen } = watch;
      watch = undefined;
      holdReplies();
      seen();
    });
    client.pipe(upstream);
    if (mode === 'holding') upstream.pause();
    else upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  server.on('error', () => undefined);
  const dropHanging = () => {
    for (const socket of hanging) socket.destroy();
    hanging.clear();
  };

  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      mode = 'cut';
      for (const { client, upstream } of [...pairs]) {
        client.resetAndDestroy();
        upstream.destroy();
      }
      pairs.clear();
      dropHanging();
    },
    stall() {
      mode = 'stalled';
      for (const { client, upstream } of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    holdRepliesAfter(marker) {
      return new Promise<void>((seen) => {
        watch = { marker: Buffer.from(marker), seen };
      });
    },
    restore() {
      const was = mode;
      mode = 'up';
      watch = undefined;
      dropHanging();
      if (was === 'holding') for (const { client, upstream } of pairs) upstream.pipe(client);
      if (was !== 'stalled') return;
      for (const { client, upstream } of pairs) {
        client.pipe(upstream);
        upstream.pipe(client);
      }
    },
    get openConnections() {
      return pairs.size;
    },
    async close() {
      mode = 'cut';
      dropHanging();
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
