package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"mime/multipart"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"inventory/app"
	"inventory/config"
)

const importMutation = `mutation($in: ImportCodesInput!) { importCodes(input: $in) {
	batch { batchRef received inserted duplicates rejected preordersFilled } userErrors { code message field } } }`

type importPayload struct {
	Batch *struct {
		BatchRef                                                  string
		Received, Inserted, Duplicates, Rejected, PreordersFilled int
	}
	UserErrors []struct{ Code, Message string }
}

// upload sends importCodes as a GraphQL multipart request with file as the
// upload (graphql-multipart-request-spec).
func (ts *testServer) upload(token string, in map[string]any, file string) gqlResponse {
	ts.t.Helper()
	in["file"] = nil
	ops, err := json.Marshal(map[string]any{"query": importMutation, "variables": map[string]any{"in": in}})
	if err != nil {
		ts.t.Fatal(err)
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	_ = w.WriteField("operations", string(ops))
	_ = w.WriteField("map", `{"0": ["variables.in.file"]}`)
	part, err := w.CreateFormFile("0", "codes.csv")
	if err != nil {
		ts.t.Fatal(err)
	}
	_, _ = part.Write([]byte(file))
	if err := w.Close(); err != nil {
		ts.t.Fatal(err)
	}
	return ts.post("Bearer "+token, w.FormDataContentType(), body.Bytes())
}

// TestCodesOverHTTP imports codes by upload and by list, sells two to a
// checkout and reveals them only to that checkout, the service and admins,
// recording each reveal.
func TestCodesOverHTTP(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	var p map[string]any
	ts.mustData(ts.gql(ts.admin, `mutation { createLocation(input: {code: "AMS", name: "Amsterdam"}) { userErrors { code } } }`, nil), "createLocation", &p)
	ts.mustData(ts.gql(ts.admin, `mutation { createSku(input: {code: "GC", name: "Gift card", kind: CODES}) { userErrors { code } } }`, nil), "createSku", &p)

	file := "code,value\nGC-AAAA-0001,25\ngc aaaa 0001,25\nGC-AAAA-0002,25\n\nGC-AAAA-0003\n"
	var up importPayload
	ts.mustData(ts.upload(ts.admin, map[string]any{"sku": "GC", "location": "AMS", "batchRef": "PO-1"}, file), "importCodes", &up)
	if up.Batch == nil || up.Batch.Received != 5 || up.Batch.Inserted != 3 || up.Batch.Duplicates != 1 || up.Batch.Rejected != 1 {
		t.Fatalf("upload: %+v", up)
	}
	// The same batch again: same answer, nothing inserted.
	var again importPayload
	ts.mustData(ts.upload(ts.admin, map[string]any{"sku": "GC", "location": "AMS", "batchRef": "PO-1"}, "GC-NEW-1\n"), "importCodes", &again)
	if *again.Batch != *up.Batch {
		t.Fatalf("re-import: %+v, first %+v", again.Batch, up.Batch)
	}
	var list importPayload
	ts.mustData(ts.gql(ts.admin, importMutation, map[string]any{"in": map[string]any{"sku": "GC", "location": "AMS", "batchRef": "PO-2",
		"codes": []string{"GC-BBBB-0001", "GC-AAAA-0003", "bad\tcode"}}}), "importCodes", &list)
	if list.Batch == nil || list.Batch.Inserted != 1 || list.Batch.Duplicates != 1 || list.Batch.Rejected != 1 {
		t.Fatalf("list import: %+v", list)
	}
	if n := ts.count(`SELECT on_hand FROM balances`); n != 4 {
		t.Fatalf("on_hand %d after importing 4 codes", n)
	}
	var neither importPayload
	ts.mustData(ts.gql(ts.admin, importMutation, map[string]any{"in": map[string]any{"sku": "GC", "location": "AMS", "batchRef": "PO-3"}}), "importCodes", &neither)
	if neither.Batch != nil || len(neither.UserErrors) != 1 || neither.UserErrors[0].Code != "INVALID_INPUT" {
		t.Fatalf("import with neither codes nor file: %+v", neither)
	}
	for who, want := range map[string]string{"": "UNAUTHENTICATED", ts.service: "FORBIDDEN"} {
		r := ts.gql(who, importMutation, map[string]any{"in": map[string]any{"sku": "GC", "location": "AMS", "batchRef": "X", "codes": []string{"GC-X"}}})
		if r.errorCode() != want {
			t.Fatalf("importCodes as %q: %+v", who, r)
		}
		r = ts.gql(who, `mutation { setPreorder(input: {sku: "GC", location: "AMS", pendingSupply: 3}) { userErrors { code } } }`, nil)
		if r.errorCode() != want {
			t.Fatalf("setPreorder as %q: %+v", who, r)
		}
	}

	// Checkout A buys two codes; the backend confirms.
	token := func(checkout string) string {
		var tok struct{ Token string }
		ts.mustData(ts.gql(ts.service, `mutation($c: String!) { issueCheckoutToken(checkoutId: $c) { token } }`, map[string]any{"c": checkout}), "issueCheckoutToken", &tok)
		return tok.Token
	}
	cartA, cartB := token("cart-A"), token("cart-B")
	res, err := decodeReserve(ts.gql(cartA, reserveMutation, reserveVars("cart-A", "k", "GC", 2)))
	if err != nil || res.Reservation == nil {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	var conf struct{ UserErrors []any }
	ts.mustData(ts.gql(ts.service, `mutation($id: ID!) { confirmReservation(input: {id: $id, orderRef: "ORD-GC"}) { userErrors { code } } }`,
		map[string]any{"id": res.Reservation.ID}), "confirmReservation", &conf)
	if len(conf.UserErrors) != 0 {
		t.Fatalf("confirm: %+v", conf)
	}

	const readOrder = `{ order(ref: "ORD-GC") { lines { sku quantity pendingCodes codes } } }`
	type orderView struct {
		Lines []struct {
			Codes        []string
			PendingCodes int
		}
	}
	var mine *orderView
	ts.mustData(ts.gql(cartA, readOrder, nil), "order", &mine)
	if mine == nil || len(mine.Lines) != 1 || len(mine.Lines[0].Codes) != 2 || mine.Lines[0].PendingCodes != 0 {
		t.Fatalf("owner's order: %+v", mine)
	}
	codes := mine.Lines[0].Codes
	if !slices.Equal(codes, []string{"GC-AAAA-0001", "GC-AAAA-0002"}) {
		t.Fatalf("sold codes %v: want the oldest batch's first two, as imported", codes)
	}
	var theirs *orderView
	ts.mustData(ts.gql(cartB, readOrder, nil), "order", &theirs)
	if theirs != nil {
		t.Fatalf("another checkout read the order: %+v", theirs)
	}
	var viaReservation *struct{ Order *orderView }
	ts.mustData(ts.gql(cartB, `query($id: ID!) { reservation(id: $id) { order { lines { codes } } } }`, map[string]any{"id": res.Reservation.ID}), "reservation", &viaReservation)
	if viaReservation != nil {
		t.Fatalf("another checkout read the reservation: %+v", viaReservation)
	}
	var admin *orderView
	ts.mustData(ts.gql(ts.admin, readOrder, nil), "order", &admin)
	if admin == nil || !slices.Equal(admin.Lines[0].Codes, codes) {
		t.Fatalf("admin's view: %+v", admin)
	}
	if n := ts.count(`SELECT count(*) FROM code_reveals`); n != 2 {
		t.Fatalf("%d reveals recorded, want 2 (owner, admin)", n)
	}
	if n := ts.count(`SELECT count(*) FROM code_reveals WHERE actor = 'checkout:cart-A' AND codes = 2`); n != 1 {
		t.Fatalf("the owner's reveal is not recorded as such")
	}
	// The plaintext is nowhere in the tables the server writes.
	for _, table := range []string{"codes", "code_batches", "stock_movements", "orders", "order_lines", "code_reveals", "river_job"} {
		if n := ts.count(`SELECT count(*) FROM ` + table + ` t WHERE t::text ILIKE '%AAAA-0001%' OR t::text ILIKE '%AAAA0001%'`); n != 0 {
			t.Fatalf("plaintext code found in %s", table)
		}
	}
}

// TestCodesKeysAtStartup: a server (or CLI) given keys that do not open the
// stored codes refuses to start rather than serve garbage later.
func TestCodesKeysAtStartup(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	var p map[string]any
	ts.mustData(ts.gql(ts.admin, `mutation { createLocation(input: {code: "AMS", name: "Amsterdam"}) { userErrors { code } } }`, nil), "createLocation", &p)
	ts.mustData(ts.gql(ts.admin, `mutation { createSku(input: {code: "GC", name: "Gift card", kind: CODES}) { userErrors { code } } }`, nil), "createSku", &p)

	// The CLI import, from a file.
	path := filepath.Join(t.TempDir(), "codes.txt")
	if err := os.WriteFile(path, []byte("CLI-1\nCLI-2\nCLI-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := ts.cli("import", "--sku", "GC", "--location", "AMS", "--batch", "CLI", path); !strings.Contains(out, "received 3, inserted 2, duplicates 1, rejected 0") {
		t.Fatalf("inventory import: %q", out)
	}

	other := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 32)))
	for name, change := range map[string][2]string{
		"wrong key":      {"INVENTORY_CODES_KEY", "k1:" + other},
		"missing key id": {"INVENTORY_CODES_KEY", "k2:" + other},
		"wrong HMAC key": {"INVENTORY_CODES_HMAC_KEY", other},
		"no key":         {"INVENTORY_CODES_KEY", ""},
	} {
		env := map[string]string{}
		for k, v := range ts.env {
			env[k] = v
		}
		env[change[0]] = change[1]
		cfg, err := config.Load(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		srv, err := app.Start(ctx, cfg, app.NewLogger(testWriter{t}, "error"))
		if err == nil {
			cancel()
			_ = srv.Wait()
			t.Fatalf("%s: the server started", name)
		}
		cancel()
		if !strings.Contains(err.Error(), "INVENTORY_CODES") && !strings.Contains(err.Error(), "key") {
			t.Fatalf("%s: error does not name the key: %v", name, err)
		}
	}
	// A rotated ring (new key first, old key kept) starts and still opens.
	rotated := map[string]string{}
	for k, v := range ts.env {
		rotated[k] = v
	}
	rotated["INVENTORY_CODES_KEY"] = "k2:" + other + ",k1:" + testCodesKey
	cfg, err := config.Load(func(k string) string { return rotated[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.Start(ctx, cfg, app.NewLogger(testWriter{t}, "error"))
	if err != nil {
		cancel()
		t.Fatalf("rotated keys: %v", err)
	}
	cancel()
	if err := srv.Wait(); err != nil {
		t.Fatal(err)
	}
}
