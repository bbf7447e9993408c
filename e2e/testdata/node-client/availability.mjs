// Watches one SKU's availabilityChanged without a token, as a product page
// does, with the graphql-ws client (WebSocket) or the graphql-sse client
// (Server-Sent Events), printing each value as one JSON line, and exits once
// available equals UNTIL. Used by availability_changed_test.go.
//
// usage: node availability.mjs ws|sse URL SKU UNTIL
import { createClient as createWSClient } from 'graphql-ws';
import { createClient as createSSEClient } from 'graphql-sse';
import WebSocket from 'ws';

const [transport, url, sku, until] = process.argv.slice(2);
const client = transport === 'sse'
  ? createSSEClient({ url, retryAttempts: 0 })
  : createWSClient({ url, webSocketImpl: WebSocket, retryAttempts: 0 });

const timer = setTimeout(() => { console.error('timed out'); process.exit(2); }, 25000);
client.subscribe(
  {
    query: 'subscription($skus: [String!]!) { availabilityChanged(skus: $skus) { sku available onHand reserved } }',
    variables: { skus: [sku] },
  },
  {
    next: (msg) => {
      if (msg.errors) { console.error(JSON.stringify(msg.errors)); process.exit(3); }
      console.log(JSON.stringify(msg.data.availabilityChanged));
      if (msg.data.availabilityChanged.available === Number(until)) {
        clearTimeout(timer);
        client.dispose();
        process.exit(0);
      }
    },
    error: (err) => {
      console.error('error', err && (err.code ? `close ${err.code} ${err.reason}` : String(err)));
      process.exit(4);
    },
    complete: () => { console.error('completed early'); process.exit(5); },
  },
);
