package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"inventory/app"

	"github.com/spf13/cobra"

	"inventory/store"
)

// rekeyRetryPause is how long `codes rekey` waits before looking again when a
// batch found only codes whose balances other transactions hold.
const rekeyRetryPause = 100 * time.Millisecond

func codesCommands(ctx context.Context, load configFunc, stdout io.Writer) *cobra.Command {
	codes := &cobra.Command{Use: "codes", Short: "Maintain stored unit codes", Args: noArgs}
	var batch int
	var pause time.Duration
	rekey := readsSettings(&cobra.Command{
		Use:   "rekey",
		Short: "Re-encrypt every stored code and webhook secret under the current (first) INVENTORY_CODES_KEY",
		Long: `Re-encrypt stored codes sealed under older keys with the first key of
INVENTORY_CODES_KEY, in batches of --batch codes, each its own short
transaction, while the server keeps serving (reserves, confirms and reveals go
on; a reserve on a balance being rewritten waits for that batch). Only the
ciphertext and key id change: no code is lost, duplicated or changed.
Stopping it (Ctrl-C, a crash) loses nothing: run it again and it goes on
where it stopped. Then webhook secrets are sealed again under the same key.
When it says so, the older keys can be removed from INVENTORY_CODES_KEY
(docs/operations/secrets-rotation.md, "Codes key").`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch < 1 || batch > store.MaxRekeyBatch {
				return UsageError{fmt.Errorf("--batch must be between 1 and %d, got %d", store.MaxRekeyBatch, batch)}
			}
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			return app.WithStore(ctx, cfg, func(st *store.Store) error { return rekeyCodes(ctx, st, batch, pause, stdout) })
		},
	}, slices.Concat(dbSettings, codesSettings)...)
	rekey.Flags().IntVar(&batch, "batch", 500, fmt.Sprintf("codes per transaction (1..%d)", store.MaxRekeyBatch))
	rekey.Flags().DurationVar(&pause, "pause", 0, "wait between batches, to leave the database more room")
	codes.AddCommand(rekey)
	return codes
}

// rekeyCodes moves every code off every older key, then re-seals the webhook
// secrets, printing progress; its last line says what may be removed.
func rekeyCodes(ctx context.Context, st *store.Store, batch int, pause time.Duration, stdout io.Writer) error {
	current := st.Keyring.CurrentKeyID()
	usage, err := st.CodesKeyUsage(ctx)
	if err != nil {
		return err
	}
	var old []string
	for id := range usage {
		if id != current {
			old = append(old, id)
		}
	}
	sort.Strings(old)
	for _, id := range old {
		done := 0
		for {
			n, err := st.CodesRekeyBatch(ctx, id, batch)
			if err != nil {
				return err
			}
			done += n
			if n == 0 {
				// Nothing rewritable: finished, or the rest is under
				// locked balances for a moment.
				left, err := st.CodesKeyUsage(ctx)
				if err != nil {
					return err
				}
				if left[id] == 0 {
					break
				}
				n := left[id]
				fmt.Fprintf(stdout, "key %s: %d codes wait for busy balances\n", id, n)
				if err := sleep(ctx, rekeyRetryPause); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(stdout, "key %s: %d of %d codes re-encrypted under %s\n", id, done, usage[id], current)
			if err := sleep(ctx, pause); err != nil {
				return err
			}
		}
	}
	n, err := st.WebhookSecretsSeal(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d webhook secrets sealed again under %s\n", n, current)
	if len(old) == 0 {
		fmt.Fprintf(stdout, "every code is under key %s: nothing to re-encrypt\n", current)
		return nil
	}
	fmt.Fprintf(stdout, "every code is under key %s: %s may now be removed from INVENTORY_CODES_KEY\n", current, strings.Join(old, ", "))
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
