package main

import (
	"context"
	"fmt"
	"strings"
)

// fanoutSpecs are the subscriber rows the run includes, at the sizes of
// the options (issue 18's in the full run, tiny ones in -smoke). The
// availabilityChanged row is left out, with a note saying so, when the
// server's schema has no such subscription.
func (b *bench) fanoutSpecs(ctx context.Context, rep *report) []fanoutSpec {
	var specs []fanoutSpec
	if b.opts.wants("fanout") {
		specs = append(specs,
			fanoutSpec{name: fmt.Sprintf("%d `stockChanged`, unfiltered", b.opts.subscribers), subscribers: b.opts.subscribers, clients: b.opts.fanClients,
				subscribe: stockChangedSub, bearer: b.adminKey, pick: spreadSKU, ratio: 0.5, p99: 500},
			fanoutSpec{name: fmt.Sprintf("%d `stockChanged`, filtered to one SKU each", b.opts.subscribers), subscribers: b.opts.subscribers, clients: b.opts.fanClients,
				subscribe: b.stockChangedOneSKU, bearer: b.adminKey, pick: spreadSKU, ratio: 0.9})
	}
	if b.opts.wants("viewers") {
		ok, err := b.hasSubscription(ctx, "availabilityChanged")
		switch {
		case err != nil:
			rep.notes = append(rep.notes, "FAIL: viewers: "+err.Error())
		case !ok:
			rep.notes = append(rep.notes, "viewers: not available: the server has no availabilityChanged")
			logf("viewers: not available: the server has no availabilityChanged; skipped")
		default:
			specs = append(specs, fanoutSpec{name: fmt.Sprintf("%d `availabilityChanged` viewers of one hot SKU", b.opts.viewers), subscribers: b.opts.viewers,
				clients: b.opts.viewClients, subscribe: b.availabilityViewer, pick: func(b *bench) string { return b.cat.hot },
				viewers: true, perAddress: viewersPerAddress, ratio: 0.9, p99: 250, rssMB: 600})
		}
	}
	return specs
}

// viewersPerAddress is how many viewers share one loopback source address:
// product pages come from many IPs, and the per-IP caps on anonymous
// sockets and subscriptions (lifted in serverEnv too) must not be what the
// row measures.
const viewersPerAddress = 50

// hasSubscription says whether the server's schema has the subscription
// field name, by introspection with the admin key.
func (b *bench) hasSubscription(ctx context.Context, name string) (bool, error) {
	var out struct {
		Type struct {
			Fields []struct{ Name string }
		} `json:"__type"`
	}
	if err := b.gql.do(ctx, b.adminKey, `{ __type(name: "Subscription") { fields { name } } }`, nil, &out); err != nil {
		return false, fmt.Errorf("introspect the subscriptions: %w", err)
	}
	var names []string
	for _, f := range out.Type.Fields {
		if f.Name == name {
			return true, nil
		}
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		return false, fmt.Errorf("introspection listed no subscriptions")
	}
	logf("subscriptions in the schema: %s", strings.Join(names, ", "))
	return false, nil
}
