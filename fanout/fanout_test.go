package fanout_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"inventory/fanout"
)

// TestGroupFanoutDeliversWhatEachWouldAlone: subscribers of the same
// stockChanged operation over graphql-transport-ws, graphql-ws and SSE,
// plus one that never reads, each receive byte for byte the payloads a
// subscriber running alone receives (the reference resumes from a cursor,
// which runs it alone through gqlgen's own path), in order, although one
// member reads nothing; and the schema executed each event twice (once for
// the group, once for the reference), not once per subscriber.
func TestGroupFanoutDeliversWhatEachWouldAlone(t *testing.T) {
	t.Parallel()
	e := setup(t, fanout.Config{})
	seq0 := e.feed.publish("HP", 5)

	ref := e.dial("ops", false, false)
	ref.subscribe("ref", stockChanged, map[string]any{"after": seq0})
	e.waitStats(0, 0) // a resumed subscription runs alone: no group
	e.waitFor("the reference's execution", func() bool { return e.feed.started.Load() == 1 })

	const nWS, nLegacy, nSSE = 5, 3, 3
	var members []*wsClient
	for i := range nWS + nLegacy {
		c := e.dial("ops", i >= nWS, false)
		c.subscribe(fmt.Sprint("m", i), stockChanged, map[string]any{"after": nil})
		members = append(members, c)
	}
	slow := e.dial("ops", false, false) // subscribes, then reads nothing
	slow.subscribe("slow", stockChanged, map[string]any{"after": nil})
	var streams []*sse
	for range nSSE {
		streams = append(streams, e.openSSE("ops", stockChanged, map[string]any{"after": nil}))
	}
	group := nWS + nLegacy + 1 + nSSE
	e.waitStats(1, int64(group))
	execs0 := e.reg.Stats().Executions

	const events = 15
	for i := range events {
		e.feed.publish("HP", 6+i)
	}

	// The reference: what one subscriber alone is sent.
	var want [][]byte
	var wantEvents []stockEvent
	for range events {
		m, err := ref.next(10 * time.Second)
		if err != nil || m.Type != "next" || m.ID != "ref" {
			t.Fatalf("reference: %+v %v", m, err)
		}
		want = append(want, m.Payload)
		var ev stockEvent
		decodeField(t, m.Payload, "stockChanged", &ev)
		wantEvents = append(wantEvents, ev)
	}
	requireDense(t, wantEvents, seq0+1)

	for i, c := range members {
		for j := range events {
			m, err := c.next(10 * time.Second)
			wantType := "next"
			if i >= nWS {
				wantType = "data"
			}
			if err != nil || m.Type != wantType || m.ID != fmt.Sprint("m", i) {
				t.Fatalf("member %d message %d: %+v %v", i, j, m, err)
			}
			if !bytes.Equal(m.Payload, want[j]) {
				t.Fatalf("member %d message %d:\n%s\nwant (alone)\n%s", i, j, m.Payload, want[j])
			}
		}
	}
	for i, s := range streams {
		got, ended := s.next(events)
		if ended {
			t.Fatalf("SSE member %d: the stream ended after %d messages", i, len(got))
		}
		for j := range got {
			if !bytes.Equal(got[j], want[j]) {
				t.Fatalf("SSE member %d message %d:\n%s\nwant (alone)\n%s", i, j, got[j], want[j])
			}
		}
	}

	// Once for the group, once for the reference; two executions in all.
	e.waitFor("the reference's executions counted", func() bool { return e.reg.Stats().Executions-execs0 >= 2*events })
	s := e.reg.Stats()
	if got := s.Executions - execs0; got != 2*events {
		t.Fatalf("executions for %d events and %d subscribers: %d, want %d (once per group)", events, group+1, got, 2*events)
	}
	if s.Groups != 1 || e.feed.started.Load() != 2 {
		t.Fatalf("groups %d, executions started %d: want 1 and 2", s.Groups, e.feed.started.Load())
	}
}
