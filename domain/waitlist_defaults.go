package domain

// WaitlistTTL is the TTL of a joinWaitlist that names no ttlSeconds:
// DefaultWaitlistTTL, capped for a checkout token by its MaxWaitlistTTL, so
// that leaving ttlSeconds out is never refused.
func (f *FairUse) WaitlistTTL() int {
	if f == nil {
		return DefaultWaitlistTTL
	}
	return min(DefaultWaitlistTTL, f.MaxWaitlistTTL)
}
