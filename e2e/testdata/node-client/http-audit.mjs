// Runs the GraphQL over HTTP conformance audit of graphql-http (the
// reference implementation's auditServer) against a server's /graphql and
// prints every result as one JSON line: {id, name, status, reason,
// httpStatus}. status is ok, notice, warn (a SHOULD not met) or error (a
// MUST not met); the caller decides what fails. Used by http_audit_test.go.
//
// usage: node http-audit.mjs URL
import { auditServer } from 'graphql-http';

const [url] = process.argv.slice(2);
if (!url) {
  console.error('usage: node http-audit.mjs URL');
  process.exit(2);
}
const results = await auditServer({ url });
for (const r of results) {
  const line = { id: r.id, name: r.name, status: r.status };
  if (r.status !== 'ok') {
    line.reason = r.reason;
    line.httpStatus = r.response?.status;
  }
  console.log(JSON.stringify(line));
}
