package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"

	"inventory/app"
	"inventory/config"

	"github.com/spf13/cobra"

	"inventory/domain"
	"inventory/store"
)

// UsageError is a command line that does not parse: unknown command or flag,
// missing or extra arguments. Main exits 2 for it, after the usage.
type UsageError struct{ error }

func (e UsageError) Unwrap() error { return e.error }

// version and commit are set at build time (make build and make run pass
// -ldflags "-X inventory/cli.version=… -X inventory/cli.commit=…"); otherwise they come from the
// build info (module version, VCS stamp) when the go command recorded them.
var version, commit = "", ""

// settingsAnnotation names the cobra annotation that lists the settings a
// command reads, comma-separated ("*": every one). readsSettings sets it, and
// both the command's configuration and its help come from it, so help never
// lists a setting the command ignores, nor leaves out one it reads.
const settingsAnnotation = "inventory-settings"

// dbSettings are what every command that opens the database reads: where it
// is, and the session settings of its connections (poolConfig).
var dbSettings = []string{"DATABASE_URL", "DATABASE_DIRECT_URL", "INVENTORY_DB_POOLER", "INVENTORY_DB_STATEMENT_TIMEOUT", "INVENTORY_DB_LOCK_TIMEOUT"}

// codesSettings are what commands that seal or open codes read as well.
var codesSettings = []string{"INVENTORY_CODES_KEY", "INVENTORY_CODES_HMAC_KEY"}

// readsSettings records that cmd reads exactly names (of settings.go) and
// adds them to its help, under an Environment heading.
func readsSettings(cmd *cobra.Command, names ...string) *cobra.Command {
	cmd.Annotations = map[string]string{settingsAnnotation: strings.Join(names, ",")}
	cmd.Long += "\n\nEnvironment:\n" + settingsHelp(names)
	return cmd
}

// readsEverySetting is readsSettings for serve: its help names the
// essentials and where the rest are.
func readsEverySetting(cmd *cobra.Command) *cobra.Command {
	var essentials []string
	for _, s := range config.Settings {
		if s.Group == "Essentials" {
			essentials = append(essentials, s.Name)
		}
	}
	cmd.Annotations = map[string]string{settingsAnnotation: "*"}
	cmd.Long += "\n\nEnvironment:\n" + settingsHelp(essentials) +
		"\n  Every other setting: inventory settings, or docs/configuration.md."
	return cmd
}

// settingsHelp lists names with their Brief and default, one a line.
func settingsHelp(names []string) string {
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	var lines []string
	for _, n := range names {
		i := slices.IndexFunc(config.Settings, func(s config.Setting) bool { return s.Name == n })
		if i < 0 || config.Settings[i].Brief == "" {
			panic("commands.go: " + n + " is not a setting of settings.go with a Brief")
		}
		line := fmt.Sprintf("  %-*s  %s", width, n, config.Settings[i].Brief)
		if d := config.Settings[i].Default; d != "" {
			line += " (default " + d + ")"
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// settingsGetenv is getenv as cmd may see it: only the settings it reads
// (settingsAnnotation); every other name reads as unset.
func settingsGetenv(cmd *cobra.Command, getenv func(string) string) func(string) string {
	names := cmd.Annotations[settingsAnnotation]
	if names == "*" {
		return getenv
	}
	reads := strings.Split(names, ",")
	return func(name string) string {
		if slices.Contains(reads, name) {
			return getenv(name)
		}
		return ""
	}
}

// Main runs one command line and returns the process's exit status: 0, 1
// after an error (printed to stderr), 2 after a command line that does not
// parse (printed with the usage).
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	err := Run(ctx, args, getenv, stdout, stderr)
	var usage UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return 2 // Run printed the error and the usage
	default:
		fmt.Fprintln(stderr, "inventory:", err)
		return 1
	}
}

// Run executes one command line; Main and the tests call it. Help never
// needs a setting or touches a database: configuration is read by each
// command when it runs.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	root := newRootCommand(ctx, getenv, stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return nil
	}
	var unknown unknownCommandError
	if errors.As(err, &unknown) {
		// The whole usage would bury the one line that matters.
		fmt.Fprintf(stderr, "%s\n%s\nRun '%s --help' for its commands.\n", err, unknown.suggestions(), unknown.parent.CommandPath())
		return UsageError{err}
	}
	var usage UsageError
	if errors.As(err, &usage) || isCobraUsageError(err) {
		fmt.Fprintf(stderr, "%s\n\n%s", err, cmd.UsageString())
		return UsageError{err}
	}
	return err
}

// isCobraUsageError recognizes cobra's own complaints about a command line,
// which it returns as plain errors.
func isCobraUsageError(err error) bool {
	for _, prefix := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "flag needs an argument", "invalid argument"} {
		if strings.HasPrefix(err.Error(), prefix) {
			return true
		}
	}
	return false
}

// unknownCommandError is a word where parent wants one of its commands:
// Run prints it with cobra's suggestions instead of the usage.
type unknownCommandError struct {
	parent *cobra.Command
	name   string
}

func (e unknownCommandError) Error() string {
	return fmt.Sprintf("unknown command %q for %q", e.name, e.parent.CommandPath())
}

// suggestions is cobra's "Did you mean this?" list for the name (commands
// within SuggestionsMinimumDistance edits, or that it begins), or "".
func (e unknownCommandError) suggestions() string {
	near := e.parent.SuggestionsFor(e.name)
	if len(near) == 0 {
		return ""
	}
	return "\nDid you mean this?\n\t" + strings.Join(near, "\n\t") + "\n"
}

// newRootCommand builds the CLI: "inventory" alone serves.
func newRootCommand(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	// load reads the environment when a command runs, never for help:
	// only the settings cmd's help lists (readsSettings).
	load := func(cmd *cobra.Command) (config.Config, *slog.Logger, error) {
		cfg, err := config.Load(settingsGetenv(cmd, getenv))
		if err != nil {
			return cfg, nil, err
		}
		return cfg, app.NewLogger(stderr, cfg.LogLevel), nil
	}
	serve := readsEverySetting(&cobra.Command{
		Use:   "serve",
		Short: "Run the GraphQL server (the default command)",
		Long: `Run the GraphQL server: GraphiQL at /, the API at /graphql, /admin, /metrics,
/healthz and /readyz, on LISTEN_ADDR (default :8080). Pending migrations are
applied first unless INVENTORY_MIGRATE_ON_START=false. SIGINT or SIGTERM
drains in-flight requests and stops.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, logger, err := load(cmd)
			if err != nil {
				return err
			}
			app.RouteLibraryLogs(logger)
			srv, err := app.Start(ctx, cfg, logger)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "serving on %s (GraphiQL at /, API at /graphql)\n", srv.URL)
			return srv.Wait()
		},
	})
	root := readsEverySetting(&cobra.Command{
		Use:   "inventory",
		Short: "Inventory reservation server and its command line",
		Long: `inventory is the inventory reservation server (a GraphQL API on PostgreSQL) and
its command line. Without a command it serves.`,
		Args:          noArgs,
		RunE:          serve.RunE,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Completions of the commands themselves are enough.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
	})
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// "inventory tokn create --role admin": pflag stops at --role,
		// which root does not have, but the mistake is the word before.
		if args := cmd.Flags().Args(); cmd.HasSubCommands() && len(args) > 0 {
			return UsageError{unknownCommandError{cmd, args[0]}}
		}
		return UsageError{err}
	})
	root.AddCommand(serve, migrateCommand(ctx, load, stdout), tokenCommands(ctx, load, stdout),
		importCommand(ctx, load, stdout), codesCommands(ctx, load, stdout), stockCommands(ctx, load, stdout), reconcileCommand(ctx, load, stdout), demoCommand(ctx, load, stdout),
		versionCommand(stdout), settingsCommand(stdout))
	suggestEverywhere(root)
	return root
}

// suggestEverywhere makes every command with commands of its own suggest
// the ones within 2 edits of a mistyped word, as cobra does by default for
// the root's commands only (SuggestionsFor reads the field as it is).
func suggestEverywhere(cmd *cobra.Command) {
	if cmd.HasSubCommands() && cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	for _, sub := range cmd.Commands() {
		suggestEverywhere(sub)
	}
}

// noArgs refuses arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return UsageError{unknownCommandError{cmd, args[0]}}
		}
		return UsageError{fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), strings.Join(args, " "))}
	}
	return nil
}

// exactArgs wants n arguments, named in the usage line.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return UsageError{fmt.Errorf("%s needs %d argument(s), got %d", cmd.CommandPath(), n, len(args))}
		}
		return nil
	}
}

// configFunc reads the configuration of the command that runs: the
// settings its help lists, the rest at their defaults.
type configFunc func(*cobra.Command) (config.Config, *slog.Logger, error)

func migrateCommand(ctx context.Context, load configFunc, stdout io.Writer) *cobra.Command {
	cmd := readsSettings(&cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations (River's, then the server's)",
		Long: `Apply every pending migration, River's then the server's, and list what was
applied. Safe while other instances run or migrate: they queue on a lock.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, logger, err := load(cmd)
			if err != nil {
				return err
			}
			applied, err := app.Migrate(ctx, cfg, quiet(logger))
			for _, m := range applied {
				fmt.Fprintf(stdout, "applied   %s\n", m)
			}
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(stdout, "up to date: nothing to apply")
			}
			return nil
		},
	}, slices.Concat(dbSettings, []string{"INVENTORY_LOG_LEVEL"})...)
	cmd.AddCommand(readsSettings(&cobra.Command{
		Use:   "status",
		Short: "List every migration and whether the database has it",
		Long:  `List every migration this binary knows and whether the database has it. Changes nothing.`,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			all, err := app.MigrationStatus(ctx, cfg)
			if err != nil {
				return err
			}
			pending := 0
			for _, m := range all {
				state := "applied"
				if !m.Applied {
					state, pending = "pending", pending+1
				}
				fmt.Fprintf(stdout, "%-9s %s\n", state, m)
			}
			fmt.Fprintf(stdout, "%d of %d applied, %d pending\n", len(all)-pending, len(all), pending)
			return nil
		},
	}, dbSettings...))
	return cmd
}

// quiet keeps River's and goose's own progress lines out of the migrate
// command's output, which lists what was applied itself.
func quiet(logger *slog.Logger) *slog.Logger {
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		return logger
	}
	return slog.New(slog.DiscardHandler)
}

func tokenCommands(ctx context.Context, load configFunc, stdout io.Writer) *cobra.Command {
	token := &cobra.Command{
		Use:   "token",
		Short: "Create or revoke admin and service API keys",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return UsageError{errors.New("token needs a command: create or revoke")}
		},
	}
	var role, name string
	create := readsSettings(&cobra.Command{
		Use:   "create --role admin|service --name NAME",
		Short: "Create an API key; its secret is printed once, alone on the last line",
		Long: `Create an admin or service API key. The secret is printed once, alone on the
last line of standard output (take it with tail -n1); only its hash is stored.
Names are unique among live keys.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := domain.Role(strings.ToUpper(role))
			if r != domain.RoleAdmin && r != domain.RoleService {
				return UsageError{fmt.Errorf("--role must be admin or service, got %q", role)}
			}
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			return app.WithPlainStore(ctx, cfg, func(st *store.Store) error {
				return cliError(tokenCreate(ctx, st, r, name, stdout))
			})
		},
	}, dbSettings...)
	create.Flags().StringVar(&role, "role", "", "admin or service (required)")
	create.Flags().StringVar(&name, "name", "", "a unique name for the key, e.g. checkout-backend (required)")
	_ = create.MarkFlagRequired("role")
	_ = create.MarkFlagRequired("name")
	revoke := readsSettings(&cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke the live API key called NAME",
		Long: `Revoke the live API key called NAME. Every instance refuses it within
INVENTORY_KEY_CACHE_TTL (500 ms); its WebSockets and /admin sessions close.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			return app.WithPlainStore(ctx, cfg, func(st *store.Store) error {
				if err := st.APIKeyRevoke(ctx, args[0]); err != nil {
					return cliError(err)
				}
				fmt.Fprintf(stdout, "revoked key %q\n", args[0])
				return nil
			})
		},
	}, dbSettings...)
	token.AddCommand(create, revoke)
	return token
}

func importCommand(ctx context.Context, load configFunc, stdout io.Writer) *cobra.Command {
	var in domain.ImportCodesInput
	cmd := readsSettings(&cobra.Command{
		Use:   "import --sku SKU --location LOC --batch REF FILE",
		Short: "Import unit codes (gift cards, keys) for a CODES SKU from a file",
		Long: `Import unit codes for a CODES SKU from FILE ("-" reads standard input): one
code per line, or CSV with the code in the first column; a "code" header line
is skipped. The same import as the importCodes mutation: codes are encrypted,
duplicates and rejected lines are counted, waiting pre-orders are filled, and
importing the same batch again changes nothing.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			return app.WithStore(ctx, cfg, func(st *store.Store) error { return cliError(importCodes(ctx, st, in, args[0], stdout)) })
		},
	}, slices.Concat(dbSettings, codesSettings)...)
	cmd.Flags().StringVar(&in.SKU, "sku", "", "the CODES SKU to stock (required)")
	cmd.Flags().StringVar(&in.Location, "location", "", "location code (required)")
	cmd.Flags().StringVar(&in.BatchRef, "batch", "", "batch reference; importing it again changes nothing (required)")
	for _, f := range []string{"sku", "location", "batch"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func stockCommands(ctx context.Context, load configFunc, stdout io.Writer) *cobra.Command {
	stock := &cobra.Command{
		Use:   "stock",
		Short: "Bulk stock operations (import on-hand counts from a CSV file)",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			return UsageError{errors.New("stock needs a command: import")}
		},
	}
	var reference string
	imp := readsSettings(&cobra.Command{
		Use:   "import [--reference REF] FILE.csv",
		Short: "Set on-hand counts from a CSV file (ERP or warehouse sync); exit 1 if any row failed",
		Long: `Set on-hand counts from FILE.csv, as the setStockLevels mutation does. The file
has a header line "sku,location,on_hand" or "sku,location,on_hand,expected_on_hand"
and one balance per line; an empty expected_on_hand means no guard. Rows are sent
1000 at a time, each chunk with the reference REF-N (N the chunk index; REF
defaults to the file's name and a hash of its content), so running the same file
again applies nothing. Each row applies on its own: the summary counts applied,
unchanged and failed rows and lists the first failures by line number.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			return app.WithPlainStore(ctx, cfg, func(st *store.Store) error {
				return cliError(stockImport(ctx, st, args[0], reference, stdout))
			})
		},
	}, dbSettings...)
	imp.Flags().StringVar(&reference, "reference", "", "reference prefix of the chunks (default: file name and content hash)")
	stock.AddCommand(imp)
	return stock
}

func reconcileCommand(ctx context.Context, load configFunc, stdout io.Writer) *cobra.Command {
	return readsSettings(&cobra.Command{
		Use:   "reconcile",
		Short: "Check every balance against its ledger; exit 1 if any disagrees",
		Long: `Check every balance against the ledger and the codes, print each invariant that
does not hold, and exit 1 if there is one (for cron or a deploy gate).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			return app.WithPlainStore(ctx, cfg, func(st *store.Store) error { return reconcile(ctx, st, stdout) })
		},
	}, dbSettings...)
}

func demoCommand(ctx context.Context, load configFunc, stdout io.Writer) *cobra.Command {
	return readsSettings(&cobra.Command{
		Use:   "demo",
		Short: "Load the demo catalog into a database without locations",
		Long: `Load a small demo catalog (2 locations, 5 SKUs, 20 gift-card codes) into a
database that has no locations yet; otherwise do nothing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			return app.WithStore(ctx, cfg, func(st *store.Store) error { return cliError(loadDemo(ctx, st, stdout)) })
		},
	}, slices.Concat(dbSettings, codesSettings)...)
}

// settingsCommand prints every setting as Markdown; go generate writes it to
// docs/configuration.md.
func settingsCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "settings",
		Short: "Print every environment setting, its default and meaning (Markdown)",
		Args:  noArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprint(stdout, config.Markdown())
		},
	}
}

func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build's version and commit",
		Args:  noArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(stdout, versionString())
		},
	}
}

// versionString is "inventory VERSION (commit REV[, modified], GOVERSION)".
func versionString() string {
	v, rev, dirty, goVersion := version, commit, "", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && rev == "":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = ", modified"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("inventory %s (commit %s%s, %s)", v, rev, dirty, goVersion)
}

// cliError says what went wrong in the user's terms: a business refusal by
// its message alone (not "store.CodesImport: UNKNOWN_SKU: …").
func cliError(err error) error {
	if e, ok := domain.AsError(err); ok {
		return errors.New(e.Message)
	}
	return err
}
