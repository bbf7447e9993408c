package avail

import (
	"context"
	"time"
)

// maintain reads supply figures for dirty balances, and checks the catalog
// when queries name unknown codes, at most once per CatalogInterval.
func (c *Copy) maintain(ctx context.Context) {
	var lastCatalog time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.supply:
			c.readSupply(ctx)
		case <-c.catalog:
			if wait := c.cfg.CatalogInterval - time.Since(lastCatalog); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			lastCatalog = time.Now()
			c.checkCatalog(ctx)
		}
	}
}

func (c *Copy) readSupply(ctx context.Context) {
	c.mu.Lock()
	if len(c.dirty) == 0 {
		c.mu.Unlock()
		return
	}
	skus := make([]string, 0, len(c.dirty))
	locs := make([]string, 0, len(c.dirty))
	for k := range c.dirty {
		skus, locs = append(skus, k[0]), append(locs, k[1])
	}
	c.dirty = map[[2]string]struct{}{}
	gen := c.gen
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := c.store.AvailabilitySupply(ctx, skus, locs)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("availability copy: reading supply failed; reloading", "err", err)
		}
		signal(c.reload)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return // a load since: it holds newer figures
	}
	changed := false
	for _, g := range got {
		s := c.skus[g.SKU]
		if s == nil {
			continue
		}
		for _, b := range s.balances {
			if b.location == g.Location {
				if b.pending != int32(g.PendingSupply) || b.preordered != int32(g.Preordered) || g.UpdatedAt.UnixNano() > b.updatedAt {
					changed = true
					s.version++
				}
				b.pending, b.preordered = int32(g.PendingSupply), int32(g.Preordered)
				b.updatedAt = max(b.updatedAt, g.UpdatedAt.UnixNano())
			}
		}
	}
	if changed {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// checkCatalog learns the SKUs and locations created since the copy's
// load or last check. The database work is a count unless something was
// created (store.AvailabilityCatalogSince); the write lock is held to add
// what is new, never to compare the whole catalog (the rare full read is
// compared under the read lock, which queries share).
func (c *Copy) checkCatalog(ctx context.Context) {
	c.mu.RLock()
	ready, gen, known, after := c.ready, c.gen, c.catalogSKUs, c.catalogMaxID
	fresh := !c.catalogAt.IsZero() && time.Since(c.catalogAt) <= c.recheck()
	c.mu.RUnlock()
	if !ready || fresh { // a load or a check since it was asked for
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch, err := c.store.AvailabilityCatalogSince(ctx, known, after)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("availability copy: checking the catalog failed; unknown codes are answered by the database", "err", err)
		}
		return
	}
	// A SKU found here may have balances whose events the copy has not
	// applied yet: it is answered by the database until the copy has
	// caught up past this read (sku.learned), an upper bound on its
	// snapshot.
	read := time.Now()
	added := ch.New
	if ch.Full {
		added = nil
		c.mu.RLock()
		for _, code := range ch.New {
			if c.skus[code] == nil {
				added = append(added, code)
			}
		}
		c.mu.RUnlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.gen != gen {
		return // a load since: its own catalog is what counts
	}
	for _, l := range ch.Locations {
		if _, known := c.locations[l.Code]; !known {
			c.locations[l.Code] = l.Priority
			c.learnedLocations[l.Code] = read
		}
	}
	for _, code := range added {
		if c.skus[code] == nil {
			c.skus[code] = &sku{code: code, learned: read}
		}
		delete(c.created, code)
	}
	c.catalogSKUs, c.catalogMaxID = ch.SKUs, ch.MaxID
	c.catalogAt = later(c.catalogAt, ch.At)
}

// createdSKU notes a SKU this instance has just created (its transaction
// has committed): until the copy knows it (from its first event, or a
// catalog check), the database answers it, never the copy's null. It is
// not added to the copy here: its first receipt may commit right after,
// and the copy would then answer it as empty, within its bound but not
// what the caller who just created and stocked it expects from the
// instance it used.
func (c *Copy) createdSKU(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skus[code] == nil {
		c.created[code] = struct{}{}
	}
}

// learnLocation adds a location this instance has just created, as
// learnSKU a SKU (its first balance's event then needs no reload).
func (c *Copy) learnLocation(code string, priority int) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, known := c.locations[code]; c.ready && !known {
		c.locations[code] = priority
		c.learnedLocations[code] = now
	}
}
