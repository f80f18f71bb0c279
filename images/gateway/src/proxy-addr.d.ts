// Types for the proxy-addr package (it ships none): the parts the gateway calls.
declare module 'proxy-addr' {
  import type { IncomingMessage } from 'node:http';

  type Trust = (address: string, hop: number) => boolean;
  function proxyaddr(req: IncomingMessage, trust: Trust): string | undefined;
  namespace proxyaddr {
    function compile(addresses: string[]): Trust;
  }
  export default proxyaddr;
}
