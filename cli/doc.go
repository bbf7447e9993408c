// Package cli is the inventory command line: serve, migrate, token, import,
// codes, stock, reconcile, demo, settings, version.
//
// Its rule: a command parses its arguments, reads the settings its help
// lists (and only those: readsSettings), and makes one call into app (to
// serve) or one store method per step; what the command does to stock is
// a store transaction, never SQL here. Help never needs a setting or a
// database.
package cli
