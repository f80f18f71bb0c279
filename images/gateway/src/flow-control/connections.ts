import type net from 'node:net';

export interface ConnectionLimits {
  perAddress: number;
  total: number;
}

export type ConnectionRefusal = 'connections-per-address' | 'connections-total';

/**
 * Caps on open client connections (rules `connections`, re-read for each new one): at most `total`
 * in all (as server.maxConnections) and `perAddress` from one peer address, so that connections
 * opened and left idle (slow headers, idle keep-alives) cannot take the file descriptors the
 * process's clients (data plane, database) need, nor all those of the gateway. A connection past
 * a cap is closed as it is accepted, before any byte is read. Behind an ingress every connection
 * comes from its addresses: raise `perAddress` to what it opens.
 */
export function capConnections(server: net.Server, limits: () => ConnectionLimits, onRefuse: (reason: ConnectionRefusal) => void): void {
  const byAddress = new Map<string, number>();
  let total = 0;
  server.on('connection', (socket: net.Socket) => {
    const address = socket.remoteAddress ?? '';
    const { perAddress, total: most } = limits();
    const mine = byAddress.get(address) ?? 0;
    const refusal = total >= most ? 'connections-total' : mine >= perAddress ? 'connections-per-address' : undefined;
    if (refusal) {
      onRefuse(refusal);
      socket.destroy();
      return;
    }
    total++;
    byAddress.set(address, mine + 1);
    socket.once('close', () => {
      total--;
      const left = (byAddress.get(address) ?? 1) - 1;
      if (left <= 0) byAddress.delete(address);
      else byAddress.set(address, left);
    });
  });
}
