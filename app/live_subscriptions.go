package app

import (
	"inventory/events"
	"inventory/fanout"
)

// liveSubscriptions is what /metrics reports of live subscriptions: the
// broker reads the event stream once per group of identical subscriptions
// (fanout), so a group counts as its members, and a member cut off for
// falling behind as a stalled subscriber.
type liveSubscriptions struct {
	*events.Broker
	fan *fanout.Registry
}

// Subscribers counts each subscriber: the broker's readers, with each group
// (one reader) counted as its members.
func (l liveSubscriptions) Subscribers() int {
	s := l.fan.Stats()
	return max(l.Broker.Subscribers()-int(s.Groups), 0) + int(s.Members)
}

// Stalled counts subscriptions cut off for not reading, by the broker or by
// their group.
func (l liveSubscriptions) Stalled() int64 { return l.Broker.Stalled() + l.fan.Stats().Cut }
