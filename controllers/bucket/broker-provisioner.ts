import type { StackIdentity } from './stack-identity.js';

/**
 * Makes a namespace's own user and virtual host exist on a shared RabbitMQ, so that the namespace's
 * services (and whoever reads its Secrets) reach only that vhost, never another namespace's events.
 */
export interface BrokerProvisioner {
  ensure(identity: StackIdentity, password: string): Promise<void>;
}

/** A broker the management API refused or could not be reached: retried by the reconcile's backoff. */
export class BrokerProvisioningError extends Error {}

/**
 * The management URL of an administrator's AMQP URL: the same user and host, the management plugin's
 * port (15672, or 15671 for amqps). STRATA_AMQP_MANAGEMENT_URL overrides it.
 */
export function managementUrlOf(amqpUrl: string): string {
  const amqp = new URL(amqpUrl);
  const http = new URL(`${amqp.protocol === 'amqps:' ? 'https' : 'http'}://${amqp.hostname}:${amqp.protocol === 'amqps:' ? 15671 : 15672}/`);
  http.username = amqp.username;
  http.password = amqp.password;
  return http.toString();
}

/**
 * Through RabbitMQ's management HTTP API with the administrator's credentials (a user tagged
 * `administrator`): the vhost, the user with this password (set on every call: the Secret is the
 * truth, a changed or lost password is put back), and the user's full permissions on that vhost only.
 * Every call is idempotent (PUT).
 */
export class RabbitmqManagementProvisioner implements BrokerProvisioner {
  private readonly base: URL;
  private readonly authorization: string;

  constructor(managementUrl: string) {
    const url = new URL(managementUrl);
    this.authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
    url.username = '';
    url.password = '';
    this.base = new URL('api/', url.toString().endsWith('/') ? url : `${url.toString()}/`);
  }

  async ensure(identity: StackIdentity, password: string): Promise<void> {
    const vhost = encodeURIComponent(identity.sharedBrokerVhost);
    const user = encodeURIComponent(identity.sharedBrokerUser);
    await this.put(`vhosts/${vhost}`, { description: 'Strata: one namespace' });
    await this.put(`users/${user}`, { password, tags: '' });
    await this.put(`permissions/${vhost}/${user}`, { configure: '.*', write: '.*', read: '.*' });
  }

  private async put(path: string, body: object): Promise<void> {
    let res: Response;
    try {
      res = await fetch(new URL(path, this.base), {
        method: 'PUT',
        headers: { authorization: this.authorization, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(15_000),
      });
    } catch (err) {
      throw new BrokerProvisioningError(`RabbitMQ management API unreachable at ${this.base.origin}: ${(err as Error).message}`);
    }
    // 201 created, 204 updated or unchanged.
    if (!res.ok)
      throw new BrokerProvisioningError(`RabbitMQ management API answered ${res.status} to PUT /api/${decodeURIComponent(path)}: ${await res.text()}`);
  }
}
