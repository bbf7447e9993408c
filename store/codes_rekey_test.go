package store_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"inventory/codecrypt"
	"inventory/domain"
	"inventory/testkit"
)

// storedCodes opens every stored code with keys: id -> plaintext, and
// checks each fingerprint still matches its plaintext.
func (b *testBundle) storedCodes(t *testing.T, keys *codecrypt.Keyring) map[int64]string {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `SELECT id, sku_id, key_id, ciphertext, fingerprint FROM codes`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	var id, sku int64
	var keyID string
	var sealed, fp []byte
	if _, err := pgx.ForEachRow(rows, []any{&id, &sku, &keyID, &sealed, &fp}, func() error {
		code, err := keys.Open(sku, keyID, sealed)
		if err != nil {
			return fmt.Errorf("code %d: %w", id, err)
		}
		if string(keys.Fingerprint(code)) != string(fp) {
			return fmt.Errorf("code %d: fingerprint no longer matches", id)
		}
		out[id] = code
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCodesRekeyOnline: re-encrypting 1,500 codes from key k1 to k2 in
// batches of 40 while 8 checkouts keep reserving, confirming, releasing and
// revealing, and another batch is imported: afterwards every code is under
// k2 (in SQL), every plaintext is what it was, no code was lost or
// duplicated, the code invariants hold, every operation succeeded, and the
// start-up key check passes with k1 removed from the ring.
func TestCodesRekeyOnline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k1, k2, hmacKey := codecrypt.NewKey(), codecrypt.NewKey(), codecrypt.NewKey()
	ring := func(keys string) *codecrypt.Keyring {
		k, err := codecrypt.ParseKeyring(keys, hmacKey)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	b.Store.Keyring = ring("k1:" + k1)
	b.codesSKU(t, "RK", "AMS", "RTM")
	var ams, rtm []string
	for i := range 1200 {
		ams = append(ams, codeName("RKA", i))
	}
	for i := range 300 {
		rtm = append(rtm, codeName("RKR", i))
	}
	b.codesImport(t, "RK", "AMS", "A-1", ams...)
	b.codesImport(t, "RK", "RTM", "R-1", rtm...)
	before := b.storedCodes(t, b.Store.Keyring)

	// Every instance now runs with k2 first (new codes sealed under k2), k1
	// still listed; the rekey runs beside them.
	b.Store.Keyring = ring("k2:" + k2 + ",k1:" + k1)

	var (
		wg       sync.WaitGroup
		done     atomic.Bool
		ops      atomic.Int64
		during   atomic.Int64 // operations finished while the rekey ran
		mu       sync.Mutex
		revealed = map[string]bool{}
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; i < 60; i++ {
				checkout := fmt.Sprintf("rk-%d-%d", w, i)
				loc := "AMS"
				if i%4 == 3 {
					loc = "RTM"
				}
				res, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: checkout, RequestKey: "k", TTLSeconds: 900,
					Lines: []domain.ReserveLine{{SKU: "RK", Location: ptr(loc), Quantity: 1}}})
				if err != nil {
					t.Errorf("reserve %s: %v", checkout, err)
					return
				}
				if i%3 == 2 {
					if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: res.ID, Reason: domain.ReasonCustomerCancelled}); err != nil {
						t.Errorf("release %s: %v", checkout, err)
						return
					}
				} else {
					conf, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: checkout})
					if err != nil {
						t.Errorf("confirm %s: %v", checkout, err)
						return
					}
					codes, err := b.Store.CodesReveal(b.Ctx, domain.Scope{}, orderLineOf(t, conf).ID)
					if err != nil || len(codes) != 1 {
						t.Errorf("reveal %s: %v %v", checkout, codes, err)
						return
					}
					mu.Lock()
					if revealed[codes[0]] {
						t.Errorf("code %s sold twice", codes[0])
					}
					revealed[codes[0]] = true
					mu.Unlock()
				}
				ops.Add(1)
				if !done.Load() {
					during.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		var more []string
		for i := range 200 {
			more = append(more, codeName("RKN", i))
		}
		b.codesImport(t, "RK", "AMS", "A-2", more...)
	})

	rekeyer := testkit.NewStore(t, b.Pool) // a store of its own, as the CLI's is
	rekeyer.Keyring = b.Store.Keyring
	total, batches := 0, 0
	for {
		n, err := rekeyer.CodesRekeyBatch(b.Ctx, "k1", 40)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		batches++
		if n == 0 {
			usage, err := rekeyer.CodesKeyUsage(b.Ctx)
			if err != nil {
				t.Fatal(err)
			}
			if usage["k1"] == 0 {
				break
			}
		}
	}
	done.Store(true)
	wg.Wait()
	t.Logf("rekeyed %d codes in %d batches; %d of %d operations finished during the rekey; %d deadlocks", total, batches, during.Load(), ops.Load(),
		b.sqlInt(t, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`))
	if during.Load() == 0 {
		t.Fatal("no operation ran while the rekey did: the test proves nothing about online")
	}

	if n := b.sqlInt(t, `SELECT count(*) FROM codes WHERE key_id <> 'k2'`); n != 0 {
		t.Fatalf("%d codes not under k2 after the rekey", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM codes`); n != 1700 {
		t.Fatalf("%d codes, want 1500 + 200 imported meanwhile", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) - count(DISTINCT fingerprint) FROM codes`); n != 0 {
		t.Fatalf("%d duplicate codes", n)
	}
	onlyK2 := ring("k2:" + k2)
	after := b.storedCodes(t, onlyK2)
	for id, code := range before {
		if after[id] != code {
			t.Fatalf("code %d was %q, is %q", id, code, after[id])
		}
	}
	for code := range revealed {
		found := false
		for _, c := range after {
			if c == code {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("revealed code %q is not a stored one", code)
		}
	}
	b.requireCodeInvariants(t)
	b.Store.Keyring = onlyK2
	if err := b.Store.CodesKeyCheck(b.Ctx); err != nil {
		t.Fatalf("start-up key check with k1 removed: %v", err)
	}
	// Running it again is a no-op.
	if n, err := b.Store.CodesRekeyBatch(b.Ctx, "k1", 40); err != nil || n != 0 {
		t.Fatalf("second run: %d %v", n, err)
	}
}

// TestCodesRekeyKeepsScarceCodesClaimable: a balance down to its last two
// codes, reserved and released in a loop by 4 checkouts while its codes are
// re-encrypted back and forth 30 times: every reserve either holds a code or
// is OUT_OF_STOCK because the other checkouts hold both. (A rekey that locked
// only the code rows made a claim skip the locked codes and fail with an
// internal "codes balance out of step".)
func TestCodesRekeyKeepsScarceCodesClaimable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k1, k2, hmacKey := codecrypt.NewKey(), codecrypt.NewKey(), codecrypt.NewKey()
	ring := func(keys string) *codecrypt.Keyring {
		k, err := codecrypt.ParseKeyring(keys, hmacKey)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	b.Store.Keyring = ring("k1:" + k1 + ",k2:" + k2)
	b.codesSKU(t, "SC", "AMS")
	b.codesImport(t, "SC", "AMS", "S-1", "SCARCE-1", "SCARCE-2")

	var wg sync.WaitGroup
	var done atomic.Bool
	var held, out, failed atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !done.Load(); i++ {
				res, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: fmt.Sprintf("sc-%d-%d", w, i), RequestKey: "k", TTLSeconds: 900,
					Lines: []domain.ReserveLine{{SKU: "SC", Location: ptr("AMS"), Quantity: 1}}})
				switch {
				case err == nil:
					held.Add(1)
					if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: res.ID, Reason: domain.ReasonOther}); err != nil {
						t.Errorf("release: %v", err)
						return
					}
				case isCode(err, domain.CodeOutOfStock):
					out.Add(1)
				default:
					if failed.Add(1) == 1 {
						t.Errorf("reserve: %v", err)
					}
				}
			}
		})
	}
	rekeyer := testkit.NewStore(t, b.Pool)
	for round := range 30 {
		from, keys := "k1", "k2:"+k2+",k1:"+k1
		if round%2 == 1 {
			from, keys = "k2", "k1:"+k1+",k2:"+k2
		}
		rekeyer.Keyring = ring(keys)
		moved := 0
		for moved < 2 {
			n, err := rekeyer.CodesRekeyBatch(b.Ctx, from, 40)
			if err != nil {
				t.Errorf("round %d: %v", round, err)
				break
			}
			moved += n
		}
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d holds, %d OUT_OF_STOCK, %d failed reserves", held.Load(), out.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Fatalf("%d reserves failed while the codes were re-encrypted", failed.Load())
	}
	b.requireCodeInvariants(t)
}
