import amqp, { type ChannelModel, type ConfirmChannel, type Message, type Options } from 'amqplib';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from './logger.js';

/** Where a connection stands: `connected` is the only state in which publishing is attempted. */
export type AmqpConnectionState = 'connecting' | 'connected' | 'disconnected' | 'closed';

/** The broker cannot take a message now (not connected, blocked, closed): fail fast, retry later. */
export class AmqpUnavailableError extends Error {
  override name = 'AmqpUnavailableError';
}

/** The broker did not confirm a publish: nacked, unroutable, timed out, or the channel went away. */
export class AmqpPublishError extends Error {
  override name = 'AmqpPublishError';
}

export interface AmqpConnectionOptions {
  /** `amqp://user:pass@host:port/vhost`; a `heartbeat` query parameter overrides `heartbeatSeconds`. */
  url: string;
  /** Shown in RabbitMQ's management UI (client property `connection_name`) and in logs. */
  name: string;
  logger?: Logger;
  /**
   * Runs on every new connection before it counts as connected: declare exchanges and queues, open
   * consumer channels. A throw drops that connection and the next attempt runs it again.
   */
  setup?: (connection: ChannelModel) => Promise<void>;
  /** Reconnect backoff: doubles from initialDelayMs up to maxDelayMs, with ±20 % jitter. Defaults 100 / 5000 ms. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** TCP connect + AMQP handshake limit. Default 5000 ms. */
  connectTimeoutMs?: number;
  /** AMQP heartbeat, which detects a silently dead peer. Default 10 s. */
  heartbeatSeconds?: number;
  /** How long publish() waits for the broker's confirm. Default 5000 ms. */
  confirmTimeoutMs?: number;
  /** Called on every state change (metrics, logs). */
  onStateChange?: (state: AmqpConnectionState) => void;
}

interface Live {
  connection: ChannelModel;
  confirms: ConfirmChannel;
  /** messageIds the broker handed back as unroutable (basic.return comes before the confirm). */
  returned: Set<string>;
  /** Rejecters of publishes still waiting for a confirm, failed at once when the connection goes. */
  pending: Set<(err: Error) => void>;
}

/**
 * One RabbitMQ connection that heals itself. start() connects in the background and reconnects with
 * backoff whenever the connection drops (re-running `setup` each time, so topology and consumers come
 * back); 'error' and 'close' events are handled here and never crash the process. publish() goes over
 * a confirm channel and resolves only once the broker confirmed; while disconnected or blocked it
 * rejects at once with AmqpUnavailableError instead of waiting — callers (an outbox relay) keep the
 * message and retry. Any channel error tears the whole connection down and rebuilds it: one simple
 * recovery path instead of per-channel repair.
 */
export class AmqpConnection {
  private stateNow: AmqpConnectionState = 'disconnected';
  private live: Live | undefined;
  private blocked = false;
  private closing = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private readonly waiters = new Set<() => void>();
  private readonly opts: Required<Omit<AmqpConnectionOptions, 'logger' | 'setup' | 'onStateChange'>> &
    Pick<AmqpConnectionOptions, 'logger' | 'setup' | 'onStateChange'>;

  constructor(options: AmqpConnectionOptions) {
    this.opts = {
      initialDelayMs: 100,
      maxDelayMs: 5000,
      connectTimeoutMs: 5000,
      heartbeatSeconds: 10,
      confirmTimeoutMs: 5000,
      // An option passed as undefined keeps its default.
      ...(Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as AmqpConnectionOptions),
    };
  }

  get state(): AmqpConnectionState {
    return this.stateNow;
  }

  /** The open connection, for callers that open their own channels (consumers); undefined while down. */
  get connection(): ChannelModel | undefined {
    return this.live?.connection;
  }

  /** Begin connecting in the background (idempotent). */
  start(): void {
    if (this.closing) throw new AmqpUnavailableError(`${this.opts.name}: connection closed`);
    this.loop ??= this.run();
  }

  /** Resolve once connected; reject after timeoutMs (the connection keeps trying). */
  waitUntilConnected(timeoutMs = 30_000): Promise<void> {
    if (this.stateNow === 'connected') return Promise.resolve();
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        if (this.stateNow === 'connected') resolve();
        else reject(new AmqpUnavailableError(`${this.opts.name}: connection closed`));
      };
      const timer = setTimeout(() => {
        this.waiters.delete(done);
        reject(new AmqpUnavailableError(`${this.opts.name}: not connected after ${timeoutMs} ms (state ${this.stateNow})`));
      }, timeoutMs);
      this.waiters.add(done);
    });
  }

  /** A readiness check: throws unless connected. */
  assertConnected(): void {
    if (this.stateNow !== 'connected') throw new AmqpUnavailableError(`RabbitMQ ${this.stateNow}`);
  }

  /** Drop the current connection on purpose (e.g. a consumer channel broke); the loop reconnects. */
  reconnect(reason: string): void {
    const live = this.live;
    if (!live) return;
    this.opts.logger?.warn({ connection: this.opts.name, reason }, 'dropping the RabbitMQ connection to rebuild it');
    live.connection.close().catch(() => undefined);
  }

  /**
   * Publish on the confirm channel and resolve once the broker confirmed. With `mandatory`, a message
   * no queue is bound for is returned by the broker and rejected here (it would otherwise be dropped);
   * it needs a `messageId` to be recognised. Rejects with AmqpUnavailableError at once when not
   * connected, AmqpPublishError on nack, return, timeout or connection loss.
   */
  publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish = {}): Promise<void> {
    const live = this.live;
    if (!live || this.stateNow !== 'connected') return Promise.reject(new AmqpUnavailableError(`RabbitMQ ${this.stateNow}`));
    if (this.blocked) return Promise.reject(new AmqpUnavailableError('RabbitMQ blocked the connection (resource alarm)'));
    const messageId = options.messageId;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        live.pending.delete(fail);
        if (err) reject(err);
        else resolve();
      };
      const fail = (err: Error) => settle(err);
      const timer = setTimeout(
        () => settle(new AmqpPublishError(`no confirm from RabbitMQ within ${this.opts.confirmTimeoutMs} ms`)),
        this.opts.confirmTimeoutMs,
      );
      live.pending.add(fail);
      try {
        live.confirms.publish(exchange, routingKey, content, options, (err: unknown) => {
          const unroutable = messageId !== undefined && live.returned.delete(messageId);
          if (err) settle(new AmqpPublishError(`RabbitMQ refused the message: ${errorText(err)}`));
          else if (unroutable) settle(new AmqpPublishError(`no queue is bound for routing key "${routingKey}" on "${exchange}"`));
          else settle();
        });
      } catch (err) {
        // amqplib throws synchronously when the channel is already closed.
        settle(new AmqpPublishError(`publish failed: ${errorText(err)}`));
      }
    });
  }

  /** Stop reconnecting and close the connection (pending publishes fail). Safe to call twice. */
  async close(): Promise<void> {
    this.closing = true;
    this.wakeUp?.();
    await this.live?.connection.close().catch(() => undefined);
    await this.loop;
    this.setState('closed');
  }

  private async run(): Promise<void> {
    let delay = this.opts.initialDelayMs;
    while (!this.closing) {
      this.setState('connecting');
      let connection: ChannelModel | undefined;
      try {
        connection = await amqp.connect(this.urlWithHeartbeat(), {
          timeout: this.opts.connectTimeoutMs,
          clientProperties: { connection_name: this.opts.name },
        });
        const closed = this.watch(connection);
        const live = await this.openConfirmChannel(connection);
        await this.opts.setup?.(connection);
        if (this.closing) {
          await connection.close().catch(() => undefined);
          break;
        }
        this.live = live;
        this.blocked = false;
        this.setState('connected');
        this.opts.logger?.info({ connection: this.opts.name }, 'connected to RabbitMQ');
        delay = this.opts.initialDelayMs;
        const reason = await closed;
        this.live = undefined;
        const lost = new AmqpPublishError(`RabbitMQ connection lost${reason ? `: ${errorText(reason)}` : ''}`);
        for (const fail of [...live.pending]) fail(lost);
        if (!this.closing) this.opts.logger?.warn({ connection: this.opts.name, err: reason }, 'RabbitMQ connection lost; reconnecting');
      } catch (err) {
        connection?.close().catch(() => undefined);
        if (!this.closing) this.opts.logger?.warn({ connection: this.opts.name, err, retryInMs: delay }, 'cannot connect to RabbitMQ; retrying');
      }
      if (this.closing) break;
      this.setState('disconnected');
      await this.sleep(delay * (0.8 + Math.random() * 0.4));
      delay = Math.min(delay * 2, this.opts.maxDelayMs);
    }
  }

  /** Listen for the connection's end (resolves with the error, if any) and its flow-control signals. */
  private watch(connection: ChannelModel): Promise<Error | undefined> {
    connection.on('error', (err: Error) => this.opts.logger?.warn({ connection: this.opts.name, err }, 'RabbitMQ connection error'));
    connection.on('blocked', (reason: string) => {
      this.blocked = true;
      this.opts.logger?.warn({ connection: this.opts.name, reason }, 'RabbitMQ blocked publishing');
    });
    connection.on('unblocked', () => {
      this.blocked = false;
    });
    return new Promise((resolve) => connection.once('close', (err?: Error) => resolve(err)));
  }

  private async openConfirmChannel(connection: ChannelModel): Promise<Live> {
    const confirms = await connection.createConfirmChannel();
    const live: Live = { connection, confirms, returned: new Set(), pending: new Set() };
    confirms.on('error', (err: Error) => this.opts.logger?.warn({ connection: this.opts.name, err }, 'RabbitMQ publish channel error'));
    // A publish channel closed under a live connection (e.g. a precondition error) would make every
    // later publish fail: rebuild everything instead.
    confirms.on('close', () => connection.close().catch(() => undefined));
    confirms.on('return', (message: Message) => {
      const id = message.properties.messageId as string | undefined;
      if (id !== undefined) live.returned.add(id);
    });
    return live;
  }

  private urlWithHeartbeat(): string {
    const url = new URL(this.opts.url);
    if (!url.searchParams.has('heartbeat')) url.searchParams.set('heartbeat', String(this.opts.heartbeatSeconds));
    return url.toString();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = done;
    });
  }

  private setState(state: AmqpConnectionState): void {
    if (this.stateNow === state || this.stateNow === 'closed') return;
    this.stateNow = state;
    try {
      this.opts.onStateChange?.(state);
    } catch (err) {
      // A faulty hook must not stop the reconnect loop.
      this.opts.logger?.warn({ connection: this.opts.name, err }, 'AMQP state hook failed');
    }
    for (const waiter of [...this.waiters]) if (state === 'connected' || state === 'closed') waiter();
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Metrics for AMQP connections in one registry: `strata_amqp_connected{connection}` (1 while connected)
 * and `strata_amqp_disconnects_total{connection}`. Returns the `onStateChange` hook for a connection.
 * Call once per registry (prom-client refuses a metric name twice); the hook factory is per connection.
 */
export function amqpConnectionMetrics(registry: Registry): (connection: string) => (state: AmqpConnectionState) => void {
  const connected = new Gauge({
    name: 'strata_amqp_connected',
    help: 'Whether the RabbitMQ connection is up (1) or not (0)',
    labelNames: ['connection'] as const,
    registers: [registry],
  });
  const disconnects = new Counter({
    name: 'strata_amqp_disconnects_total',
    help: 'Times an established RabbitMQ connection was lost',
    labelNames: ['connection'] as const,
    registers: [registry],
  });
  return (connection) => {
    connected.set({ connection }, 0);
    let wasConnected = false;
    return (state) => {
      connected.set({ connection }, state === 'connected' ? 1 : 0);
      if (wasConnected && state !== 'connected') disconnects.inc({ connection });
      wasConnected = state === 'connected';
    };
  };
}
