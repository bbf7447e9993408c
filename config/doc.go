// Package config is the server's configuration: every environment variable
// it reads, listed once in Settings, parsed by Load into a Config.
//
// Its rule: one list is the source of the variables' names, defaults and
// meanings, for Load, for `inventory settings` and the commands' help, and
// for docs/configuration.md (generated from it). A variable read anywhere
// else is a bug that TestSettingsMatchConfig finds.
package config
