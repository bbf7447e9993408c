package fanout_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/domain"
	"inventory/fanout"
)

// TestGroupEndsWithItsLastMember: members leaving one by one leave the
// group's execution running for those who stay; the last one leaving ends
// it (its context is cancelled: the feed has no reader left) and removes
// the group, so the next subscriber starts an execution of its own.
func TestGroupEndsWithItsLastMember(t *testing.T) {
	t.Parallel()
	e := setup(t, fanout.Config{})
	var members []*wsClient
	for i := range 3 {
		c := e.dial("ops", false, false)
		c.subscribe(fmt.Sprint(i), stockChanged, nil)
		members = append(members, c)
	}
	e.waitStats(1, 3)

	_ = members[0].conn.CloseNow()
	_ = members[1].conn.CloseNow()
	e.waitStats(1, 1)
	if live := e.feed.live.Load(); live != 1 {
		t.Fatalf("%d executions reading with one member left, want 1", live)
	}
	seq := e.feed.publish("HP", 1)
	var ev stockEvent
	members[2].data("2", "stockChanged", &ev)
	if ev.Seq != seq {
		t.Fatalf("the remaining member got %+v, want seq %d", ev, seq)
	}

	_ = members[2].conn.CloseNow()
	e.waitStats(0, 0)
	e.waitFor("the group's execution to end", func() bool { return e.feed.live.Load() == 0 })

	again := e.dial("ops", false, false)
	again.subscribe("again", stockChanged, nil)
	e.waitStats(1, 1)
	if n := e.feed.started.Load(); n != 2 {
		t.Fatalf("%d executions started, want 2 (a new group after the last member left)", n)
	}
	seq = e.feed.publish("HP", 2)
	again.data("again", "stockChanged", &ev)
	if ev.Seq != seq {
		t.Fatalf("the new group's member got %+v, want seq %d", ev, seq)
	}
}

// TestGroupsAreKeptPerCaller: the same subscription asked by two callers
// runs once per caller, each execution with its own caller's scope (the
// answers it computes are that caller's); a caller's second socket joins
// its first one's group.
func TestGroupsAreKeptPerCaller(t *testing.T) {
	t.Parallel()
	e := setup(t, fanout.Config{})
	callers := []string{"alice", "bob", "alice", ""}
	var subs []*wsClient
	for i, name := range callers {
		c := e.dial(name, false, false)
		c.subscribe(fmt.Sprint(i), stockChanged, nil)
		subs = append(subs, c)
	}
	e.waitStats(3, 4)
	if n := e.feed.started.Load(); n != 3 {
		t.Fatalf("%d executions for three callers, want 3", n)
	}
	e.feed.publish("HP", 1)
	for i, c := range subs {
		var ev stockEvent
		c.data(fmt.Sprint(i), "stockChanged", &ev)
		want := callers[i]
		if want == "" {
			want = domain.Anonymous.Name
		}
		if ev.Viewer != want {
			t.Fatalf("subscriber %d (%q) was sent an answer computed for %q", i, want, ev.Viewer)
		}
	}
}

// TestStreamEndReachesEveryMember: when the shared stream ends with a
// reason, every member is sent every message before the end, then told
// the reason (over a WebSocket, an error for its own operation id); an SSE
// member's stream completes after its messages. The group is gone after.
func TestStreamEndReachesEveryMember(t *testing.T) {
	t.Parallel()
	e := setup(t, fanout.Config{})
	var subs []*wsClient
	for i := range 3 {
		c := e.dial("ops", i == 2, false)
		c.subscribe(fmt.Sprint(i), stockChanged, nil)
		subs = append(subs, c)
	}
	stream := e.openSSE("ops", stockChanged, nil)
	e.waitStats(1, 4)
	const events = 5
	for i := range events {
		e.feed.publish("HP", i)
	}
	e.feed.stop(errors.New("the stream stopped at seq 6"))

	for i, c := range subs {
		var got []stockEvent
		for range events {
			var ev stockEvent
			c.data(fmt.Sprint(i), "stockChanged", &ev)
			got = append(got, ev)
		}
		requireDense(t, got, 1)
		m, err := c.next(10 * time.Second)
		if err != nil || m.Type != "error" || m.ID != fmt.Sprint(i) || !strings.Contains(string(m.Payload), "the stream stopped at seq 6") {
			t.Fatalf("member %d after its messages: %+v %v, want the end's reason", i, m, err)
		}
	}
	got, ended := stream.next(events + 1)
	if len(got) != events || !ended {
		t.Fatalf("SSE member: %d messages, ended %v; want %d, then the end", len(got), ended, events)
	}
	e.waitStats(0, 0)
	if reports := e.cutReports(); len(reports) != 0 {
		t.Fatalf("members reported as cut off: %v", reports)
	}
}

// TestGroupsUnderConcurrentJoinsAndLeaves: subscribers joining and leaving
// one group at once while events flow each receive a dense run of events
// (nothing lost, repeated or reordered from the moment they joined), and
// when all have left the registry holds no group, member or execution.
// Run it under -race.
func TestGroupsUnderConcurrentJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	e := setup(t, fanout.Config{})
	stop := make(chan struct{})
	published := make(chan struct{})
	go func() {
		defer close(published)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				e.feed.publish("HP", i)
			}
		}
	}()
	const subscribers = 16
	var wg sync.WaitGroup
	errs := make(chan error, subscribers)
	for i := range subscribers {
		wg.Go(func() {
			c := e.dial("ops", i%3 == 0, false)
			id := fmt.Sprint("c", i)
			c.subscribe(id, stockChanged, nil)
			var got []int64
			for len(got) < 10+2*i { // leaving at different times
				m, err := c.next(10 * time.Second)
				if err != nil || (m.Type != "next" && m.Type != "data") || m.ID != id {
					errs <- fmt.Errorf("subscriber %d after %d events: %+v %v", i, len(got), m, err)
					return
				}
				var p struct {
					Data struct{ StockChanged stockEvent }
				}
				if err := json.Unmarshal(m.Payload, &p); err != nil {
					errs <- fmt.Errorf("subscriber %d: %s: %v", i, m.Payload, err)
					return
				}
				ev := p.Data.StockChanged
				if len(got) > 0 && ev.Seq != got[len(got)-1]+1 {
					errs <- fmt.Errorf("subscriber %d: seq %d after %d", i, ev.Seq, got[len(got)-1])
					return
				}
				got = append(got, ev.Seq)
			}
			_ = c.conn.CloseNow()
		})
	}
	wg.Wait()
	close(stop)
	<-published
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.waitStats(0, 0)
	e.waitFor("every execution to end", func() bool { return e.feed.live.Load() == 0 })
	if n := e.feed.started.Load(); n < 1 || n > subscribers {
		t.Fatalf("%d executions for %d subscribers", n, subscribers)
	}
}
