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
