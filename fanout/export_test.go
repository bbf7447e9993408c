package fanout

// LogLen is the length of the longest log among r's groups: the messages
// its slowest member has yet to take, which HardBacklogFactor bounds.
func LogLen(r *Registry) int {
	r.mu.Lock()
	groups := make([]*group, 0, len(r.groups))
	for _, g := range r.groups {
		groups = append(groups, g)
	}
	r.mu.Unlock()
	n := 0
	for _, g := range groups {
		g.mu.RLock()
		n = max(n, len(g.log))
		g.mu.RUnlock()
	}
	return n
}

// Renditions counts what r's groups hold for their members' spellings: the
// spellings they know and the answers rendered under them.
func Renditions(r *Registry) (spellings, rendered int) {
	r.mu.Lock()
	groups := make([]*group, 0, len(r.groups))
	for _, g := range r.groups {
		groups = append(groups, g)
	}
	r.mu.Unlock()
	for _, g := range groups {
		g.mu.RLock()
		for _, sp := range g.spellings {
			if sp != nil {
				spellings++
			}
		}
		seen := map[*renditions]bool{}
		for _, list := range [][]entry{g.newest, g.log} {
			for _, e := range list {
				if e.alts != nil && !seen[e.alts] {
					seen[e.alts] = true
					e.alts.mu.Lock()
					rendered += len(e.alts.by)
					e.alts.mu.Unlock()
				}
			}
		}
		g.mu.RUnlock()
	}
	return spellings, rendered
}
