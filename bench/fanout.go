package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// fanoutSpec is one subscriber row: n subscribers attached while clients
// clients reserve, the reserve rate measured without them just before.
type fanoutSpec struct {
	name        string
	subscribers int
	clients     int
	// subscribe is subscriber i's subscribe message (graphql-transport-ws).
	subscribe func(i int) []byte
	bearer    string              // connection_init's token; "" anonymous
	pick      func(*bench) string // the SKU each reserve takes
	// viewers measures availabilityChanged: no commit time in the message,
	// so each update is timed from the answer of the newest reserve its
	// value reflects (reserveClock): how stale the viewer's "N left" is.
	viewers bool
	// perAddress, if > 0, dials that many subscribers from each loopback
	// address (127.0.1.1, 127.0.1.2, …), as browsers of many IPs.
	perAddress int
	ratio      float64 // target: reserves with ÷ without, 0 none
	p99        float64 // target: delivery p99 in ms, 0 none
	rssMB      float64 // target: server RSS, 0 none (then it counts towards the run's peak)
}

// fanoutResult is what one fan-out row measured.
type fanoutResult struct {
	spec              fanoutSpec
	attached, dropped int
	events            uint64
	lat               histogram // commit-to-client, from the event's at (viewers: from the first delivery)
	without, load     loadResult
	rssMB             float64
	benchCPU          float64 // CPU seconds the bench process used during the load
}

// ratio is reserves/s with the subscribers over without, 0 if unknown.
func (f *fanoutResult) ratio() float64 {
	if f.without.opsPerSec() <= 0 {
		return 0
	}
	return f.load.opsPerSec() / f.without.opsPerSec()
}

var (
	atKey        = []byte(`"at":"`)
	availableKey = []byte(`"available":`)
	pingMsg      = []byte(`"type":"ping"`)
	nextMsg      = []byte(`"type":"next"`)
)

// stockChangedSub subscribes to every stock event.
func stockChangedSub(int) []byte {
	return []byte(`{"id":"1","type":"subscribe","payload":{"query":"subscription { stockChanged { seq at } }"}}`)
}

// stockChangedOneSKU subscribes subscriber i to the events of one spread
// SKU (the i-th), which the reserve load also takes.
func (b *bench) stockChangedOneSKU(i int) []byte {
	return []byte(`{"id":"1","type":"subscribe","payload":{"query":"subscription($s:[String!]){ stockChanged(skus:$s) { seq at } }","variables":{"s":["` +
		b.cat.spread[i%len(b.cat.spread)] + `"]}}}`)
}

// availabilityViewer subscribes to the hot SKU's availability, as a
// product page does.
func (b *bench) availabilityViewer(int) []byte {
	return []byte(`{"id":"1","type":"subscribe","payload":{"query":"subscription($s:[String!]!){ availabilityChanged(skus:$s) { sku available } }","variables":{"s":["` +
		b.cat.hot + `"]}}}`)
}

// subscriber is one WebSocket client (graphql-transport-ws). It keeps only
// a latency histogram, finding the event's "at" (or "available") by byte
// search instead of decoding JSON, so thousands of them stay cheap to run.
type subscriber struct {
	conn    *websocket.Conn
	lat     histogram
	events  uint64
	updates []viewerUpdate // viewers only
	dropped bool
	dropErr error // why the socket ended before the row did
}

// dialSubscriber opens one socket from local (nil: any address), sends
// connection_init with bearer (none if empty) and then sub.
func dialSubscriber(ctx context.Context, baseURL, bearer string, sub []byte, local net.Addr) (*subscriber, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}}
	if local != nil {
		d := &net.Dialer{LocalAddr: local, Timeout: 30 * time.Second}
		opts.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	}
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(baseURL, "http")+"/graphql", opts)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	conn.SetReadLimit(1 << 20)
	payload := map[string]string{}
	if bearer != "" {
		payload["Authorization"] = "Bearer " + bearer
	}
	init, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": payload})
	if err := conn.Write(ctx, websocket.MessageText, init); err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("connection_init: %w", err)
	}
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			conn.CloseNow()
			return nil, fmt.Errorf("waiting for connection_ack: %w", err)
		}
		if bytes.Contains(msg, []byte(`"connection_ack"`)) {
			break
		}
	}
	if err := conn.Write(ctx, websocket.MessageText, sub); err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return &subscriber{conn: conn}, nil
}

// maxViewerUpdates bounds the updates one viewer keeps for the latency
// computed after the run (conflated, it gets about four a second); more
// are counted but not timed.
const maxViewerUpdates = 1000

// viewerUpdate is one availabilityChanged value and when it arrived.
type viewerUpdate struct {
	available int64
	recv      int64 // UnixNano
}

// reserveClock records when each successful reserve of the viewers' SKU was
// answered: the k-th answer is when the k-th unit left "available", so a
// viewer's value V0−k is at least as old as that answer.
type reserveClock struct {
	mu    sync.Mutex
	times []int64 // UnixNano, in the order answered
}

func (c *reserveClock) wrap(fn op) op {
	return func(ctx context.Context, cl int) error {
		err := fn(ctx, cl)
		if err == nil {
			t := time.Now().UnixNano()
			c.mu.Lock()
			c.times = append(c.times, t)
			c.mu.Unlock()
		}
		return err
	}
}

// staleness is how long before recv the newest reserve that value reflects
// was answered, given start (the SKU's available when the load started);
// false for a value that reflects no reserve of the load or more than were
// answered.
func (c *reserveClock) staleness(start int64, u viewerUpdate) (time.Duration, bool) {
	k := start - u.available
	if k <= 0 || k > int64(len(c.times)) {
		return 0, false
	}
	return time.Duration(max(u.recv-c.times[k-1], 0)), true
}

// read records events until ctx ends; from is when recording starts. Each
// frame is read into one reused buffer: a thousand subscribers receive
// every event, and the load generator shares the server's cores. With
// viewer set (availabilityChanged) it keeps each value with its arrival,
// timed after the run; else it records commit-to-client from the event's at.
func (s *subscriber) read(ctx context.Context, from *atomic.Int64, viewer bool) {
	buf := make([]byte, 0, 512)
	for {
		msg, err := readFrame(ctx, s.conn, buf)
		buf = msg[:0]
		if err != nil {
			if ctx.Err() == nil {
				s.dropped, s.dropErr = true, err
			}
			return
		}
		recv := time.Now()
		if bytes.Contains(msg, pingMsg) {
			_ = s.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
			continue
		}
		if !bytes.Contains(msg, nextMsg) || recv.UnixNano() < from.Load() {
			continue
		}
		if viewer {
			i := bytes.Index(msg, availableKey)
			if i < 0 {
				continue
			}
			rest := msg[i+len(availableKey):]
			j := 0
			for j < len(rest) && (rest[j] == '-' || rest[j] >= '0' && rest[j] <= '9') {
				j++
			}
			v, err := strconv.ParseInt(string(rest[:j]), 10, 64)
			if err != nil {
				continue
			}
			s.events++
			if len(s.updates) < maxViewerUpdates {
				s.updates = append(s.updates, viewerUpdate{available: v, recv: recv.UnixNano()})
			}
			continue
		}
		at, ok := jsonString(msg, atKey)
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, string(at))
		if err != nil || t.UnixNano() < from.Load() {
			continue
		}
		s.events++
		s.lat.record(recv.Sub(t))
	}
}

// readFrame reads the next message into buf[:0].
func readFrame(ctx context.Context, conn *websocket.Conn, buf []byte) ([]byte, error) {
	_, r, err := conn.Reader(ctx)
	if err != nil {
		return buf, err
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// cpuSeconds is this process's user+system CPU time, to show what the load
// generator itself cost while it shared the machine.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// loopbackAddr is the i-th local address of the viewers: 127.0.1.1 on.
func loopbackAddr(i int) net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, byte(1+i/250/250%250), byte(1+i/250%250), byte(1+i%250))}
}

// runFanout measures the spec's reserve load alone, then attaches its
// subscribers and runs the same load with them attached.
func (b *bench) runFanout(ctx context.Context, spec fanoutSpec, d time.Duration, cell int) (fanoutResult, error) {
	res := fanoutResult{spec: spec}
	res.without = closedLoop(ctx, spec.clients, d, reserveOp(spec.pick, true)(b, cell, spec.clients))
	if res.without.failed > 0 {
		logf("  without subscribers: %d reserves failed, first: %v", res.without.failed, res.without.firstErr)
	}
	logf("  without subscribers: %.0f reserves/s", res.without.opsPerSec())
	n := spec.subscribers
	subs := make([]*subscriber, n)
	var dialErr atomic.Value
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var local net.Addr
			if spec.perAddress > 0 {
				local = loopbackAddr(i / spec.perAddress)
			}
			s, err := dialSubscriber(ctx, b.srv.URL, spec.bearer, spec.subscribe(i), local)
			if err != nil {
				dialErr.CompareAndSwap(nil, err)
				return
			}
			subs[i] = s
		})
	}
	wg.Wait()
	var live []*subscriber
	for _, s := range subs {
		if s != nil {
			live = append(live, s)
		}
	}
	res.attached = len(live)
	logf("  %d of %d subscribers attached in %s", len(live), n, time.Since(t0).Round(time.Millisecond))
	defer func() {
		for _, s := range live {
			s.conn.CloseNow()
		}
	}()
	if err, _ := dialErr.Load().(error); err != nil {
		logf("  first error attaching: %v", err)
	}
	if len(live) == 0 {
		return res, fmt.Errorf("no subscriber attached")
	}
	readCtx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	var from atomic.Int64
	from.Store(time.Now().Add(time.Hour).UnixNano()) // record nothing until the load starts
	var readers sync.WaitGroup
	for _, s := range live {
		readers.Go(func() { s.read(readCtx, &from, spec.viewers) })
	}
	time.Sleep(500*time.Millisecond + time.Duration(len(live))*50*time.Microsecond) // let the subscriptions register and their first values arrive
	var clock reserveClock
	var start int64
	load := reserveOp(spec.pick, true)(b, cell+1, spec.clients)
	if spec.viewers {
		var err error
		if start, err = b.available(ctx, spec.pick(b)); err != nil {
			return res, err
		}
		load = clock.wrap(load)
	}
	rss := sampleRSS(b.srv.cmd.Process.Pid)
	from.Store(time.Now().UnixNano())
	cpu0 := cpuSeconds()
	res.load = closedLoop(ctx, spec.clients, d, load)
	loadEnd := time.Now().UnixNano()
	res.benchCPU = cpuSeconds() - cpu0
	if res.load.failed > 0 {
		logf("  with subscribers: %d reserves failed, first: %v", res.load.failed, res.load.firstErr)
	}
	time.Sleep(time.Second) // events committed at the end are still on their way
	res.rssMB = rss.done()
	stopRead()
	readers.Wait()
	untimed := 0
	for _, s := range live {
		for _, u := range s.updates {
			// After the load, the last value waits up to a push interval
			// for its tick with no newer reserve behind it: not timed.
			if d, ok := clock.staleness(start, u); ok && u.recv <= loadEnd {
				s.lat.record(d)
			} else {
				untimed++
			}
		}
		res.lat.merge(&s.lat)
		res.events += s.events
		if s.dropped {
			if res.dropped == 0 {
				logf("  first subscriber dropped: %v", s.dropErr)
			}
			res.dropped++
		}
	}
	if untimed > 0 {
		logf("  %d updates not timed: they arrived after the load, or reflected none of its reserves", untimed)
	}
	return res, nil
}

// available reads sku's available now, anonymously.
func (b *bench) available(ctx context.Context, sku string) (int64, error) {
	var out struct{ Availability []struct{ Available int64 } }
	if err := b.gql.do(ctx, "", availabilityQuery, map[string]any{"s": []string{sku}}, &out); err != nil {
		return 0, fmt.Errorf("read %s's availability: %w", sku, err)
	}
	if len(out.Availability) != 1 {
		return 0, fmt.Errorf("read %s's availability: %d answers", sku, len(out.Availability))
	}
	return out.Availability[0].Available, nil
}
