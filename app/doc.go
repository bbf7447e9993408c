// Package app wires the server: it opens the pools, builds the stores, the
// event broker, the availability copy, River and the HTTP router from one
// config.Config, serves, and shuts all of it down in order.
//
// Its rule: app decides which part talks to which and holds no behaviour of
// its own. What a request does is in api and resolvers, what a transaction
// does is in store, what a job does is in jobs; a function here is a
// constructor call, a field assignment or a goroutine's start and stop.
// Start is the one way in, for the binary and for tests alike.
package app
