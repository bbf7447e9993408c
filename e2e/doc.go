// Package e2e holds the end-to-end tests: the whole application over real
// HTTP, WebSocket and SSE against a real PostgreSQL, started through
// app.Start in-process or as the real binary (testkit.ServerBinary), and
// the repository's own promises: its documentation's examples run, its
// scripts work, its layout holds.
//
// Nothing imports it; it has this file and tests only. Tests that need one
// package alone live next to that package.
package e2e
