package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// The ceiling is the availability row's second baseline: what any HTTP
// server on this machine can do with the same request under the same load
// generator. It is this binary run as `bench -ceiling-serve`, a child
// process like the real server: a minimal net/http handler that decodes the
// request with encoding/json, looks each SKU up in a Go map and encodes the
// same answer with encoding/json. No GraphQL, no database, no middleware.

// availabilityQuery is the document both our availability rows and the
// ceiling answer; its SHA-256 is the persisted-query hash of the GET rows.
const availabilityQuery = "query($s:[String!]!){availability(skus:$s){sku available}}"

var availabilityHash = func() string {
	sum := sha256.Sum256([]byte(availabilityQuery))
	return hex.EncodeToString(sum[:])
}()

// ceilingEntry is one element of the answer, as our server writes it.
type ceilingEntry struct {
	SKU       string `json:"sku"`
	Available int    `json:"available"`
}

type ceilingAnswer struct {
	Data struct {
		Availability []*ceilingEntry `json:"availability"`
	} `json:"data"`
}

// ceilingHandler answers POST {"query","variables":{"s":[…]}} and GET
// ?variables=…&extensions={"persistedQuery":…} from avail. An unknown SKU
// is null, as availability answers it; a GET with another hash is refused
// as our server refuses an unknown persisted query.
func ceilingHandler(avail map[string]int) http.Handler {
	entries := make(map[string]*ceilingEntry, len(avail))
	for sku, n := range avail {
		entries[sku] = &ceilingEntry{SKU: sku, Available: n}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Query     string `json:"query"`
			Variables struct {
				S []string `json:"s"`
			} `json:"variables"`
			Extensions struct {
				PersistedQuery struct {
					SHA256Hash string `json:"sha256Hash"`
				} `json:"persistedQuery"`
			} `json:"extensions"`
		}
		switch r.Method {
		case http.MethodPost:
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		case http.MethodGet:
			q := r.URL.Query()
			if err := json.Unmarshal([]byte(q.Get("variables")), &req.Variables); err != nil {
				http.Error(w, "variables: "+err.Error(), http.StatusBadRequest)
				return
			}
			if err := json.Unmarshal([]byte(q.Get("extensions")), &req.Extensions); err != nil || req.Extensions.PersistedQuery.SHA256Hash != availabilityHash {
				http.Error(w, `{"errors":[{"message":"PersistedQueryNotFound"}]}`, http.StatusOK)
				return
			}
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var ans ceilingAnswer
		ans.Data.Availability = make([]*ceilingEntry, len(req.Variables.S))
		for i, sku := range req.Variables.S {
			ans.Data.Availability[i] = entries[sku]
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&ans)
	})
}

// serveCeiling is `bench -ceiling-serve`: it reads the SKU → available map
// as JSON from stdin and serves it (serveChild) until stdin closes.
func serveCeiling() error {
	var avail map[string]int
	if err := readChildConfig("ceiling", os.Stdin, &avail); err != nil {
		return err
	}
	return serveChild("ceiling", os.Stdin, ceilingHandler(avail))
}

// ceilingProc is the running ceiling child.
type ceilingProc struct {
	*childProc
	gql *gqlClient
	// mismatch, if not empty, is how the ceiling's answer differed from
	// our server's for the same request.
	mismatch string
}

// startCeiling snapshots what our server answers for every spread SKU, and
// starts the ceiling child serving that map.
func (b *bench) startCeiling(ctx context.Context, httpClients int) (*ceilingProc, error) {
	avail := make(map[string]int, len(b.cat.spread))
	for i := 0; i < len(b.cat.spread); i += 100 {
		skus := b.cat.spread[i:min(i+100, len(b.cat.spread))]
		var out struct {
			Availability []struct {
				SKU       string
				Available int
			}
		}
		if err := b.gql.do(ctx, "", availabilityQuery, map[string]any{"s": skus}, &out); err != nil {
			return nil, fmt.Errorf("ceiling: snapshot availability: %w", err)
		}
		for _, a := range out.Availability {
			avail[a.SKU] = a.Available
		}
	}
	child, err := startChild("ceiling", "-ceiling-serve", avail)
	if err != nil {
		return nil, err
	}
	p := &ceilingProc{childProc: child}
	p.gql = newGQLClient(child.url, httpClients)
	// Like for like: the ceiling must write the bytes our server writes.
	probe := []byte(`{"query":"` + availabilityQuery + `","variables":{"s":["` + strings.Join(b.cat.spread[:3], `","`) + `"]}}`)
	theirs, err1 := p.gql.post(ctx, probe, "", nil)
	oursAns, err2 := b.gql.post(ctx, probe, "", nil)
	if err := errors.Join(err1, err2); err != nil || !bytes.Equal(bytes.TrimSpace(theirs), bytes.TrimSpace(oursAns)) {
		// Shown, not fatal: the rows still run, and the note says why the
		// ratio is not like for like.
		p.mismatch = fmt.Sprintf("the ceiling answers %.200q where our server answers %.200q (%v)", theirs, oursAns, err)
		logf("ceiling: %s", p.mismatch)
	}
	logf("ceiling: minimal net/http handler (pid %d) on %s, %d SKUs", p.pid(), p.url, len(avail))
	return p, nil
}
