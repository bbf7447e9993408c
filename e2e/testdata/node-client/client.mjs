// Subscribes to stockChanged with the graphql-ws client library (the
// graphql-transport-ws protocol as browsers and Node apps speak it) and prints
// each event as one JSON line, then exits after COUNT events. Used by
// subscriptions_node_test.go.
//
// usage: node client.mjs WS_URL TOKEN AFTER COUNT
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url, token, after, count] = process.argv.slice(2);
const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: { Authorization: `Bearer ${token}` },
  retryAttempts: 0,
});

let received = 0;
const timer = setTimeout(() => { console.error('timed out'); process.exit(2); }, 20000);
client.subscribe(
  {
    query: 'subscription($after: Int64) { stockChanged(after: $after) { seq sku location cause onHand reserved available } }',
    variables: { after: Number(after) },
  },
  {
    next: (msg) => {
      if (msg.errors) { console.error(JSON.stringify(msg.errors)); process.exit(3); }
      console.log(JSON.stringify(msg.data.stockChanged));
      if (++received === Number(count)) {
        clearTimeout(timer);
        client.dispose();
        process.exit(0);
      }
    },
    error: (err) => {
      console.error('error', err && (err.code ? `close ${err.code} ${err.reason}` : JSON.stringify(err)));
      process.exit(4);
    },
    complete: () => { console.error('completed early'); process.exit(5); },
  },
);
