package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// fanoutResult is what the fan-out scenario measured.
type fanoutResult struct {
	subscribers, attached, dropped int
	events                         uint64
	lat                            histogram // commit-to-client, from the event's at
	load                           loadResult
	clients                        int
	rssMB                          float64
	benchCPU                       float64 // CPU seconds the bench process used during the load
}

var (
	atKey   = []byte(`"at":"`)
	pingMsg = []byte(`"type":"ping"`)
	nextMsg = []byte(`"type":"next"`)
)

// subscriber is one stockChanged WebSocket client (graphql-transport-ws).
// It keeps only a latency histogram, finding the event's "at" by byte
// search instead of decoding JSON, so 1,000 of them stay cheap to run.
type subscriber struct {
	conn    *websocket.Conn
	lat     histogram
	events  uint64
	dropped bool
}

func dialSubscriber(ctx context.Context, baseURL, adminKey string) (*subscriber, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(baseURL, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	conn.SetReadLimit(1 << 20)
	init, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + adminKey}})
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
	sub := []byte(`{"id":"1","type":"subscribe","payload":{"query":"subscription { stockChanged { seq at } }"}}`)
	if err := conn.Write(ctx, websocket.MessageText, sub); err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return &subscriber{conn: conn}, nil
}

// read records events until ctx ends; from is when recording starts. Each
// frame is read into one reused buffer: a thousand subscribers receive
// every event, and the load generator shares the server's cores.
func (s *subscriber) read(ctx context.Context, from *atomic.Int64) {
	buf := make([]byte, 0, 512)
	for {
		msg, err := readFrame(ctx, s.conn, buf)
		buf = msg[:0]
		if err != nil {
			if ctx.Err() == nil {
				s.dropped = true
			}
			return
		}
		recv := time.Now()
		if bytes.Contains(msg, pingMsg) {
			_ = s.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
			continue
		}
		if !bytes.Contains(msg, nextMsg) {
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

// runFanout attaches n stockChanged subscribers, then runs the spread
// reserve load at clients clients with them attached.
func (b *bench) runFanout(ctx context.Context, n, clients int, d time.Duration, cell int) (fanoutResult, error) {
	res := fanoutResult{subscribers: n, clients: clients}
	subs := make([]*subscriber, n)
	var dialErr atomic.Value
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s, err := dialSubscriber(ctx, b.srv.URL, b.adminKey)
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
	defer func() {
		for _, s := range live {
			s.conn.CloseNow()
		}
	}()
	if err, _ := dialErr.Load().(error); err != nil {
		logf("fan-out: %d of %d subscribers attached; first error: %v", len(live), n, err)
	}
	if len(live) == 0 {
		return res, fmt.Errorf("fan-out: no subscriber attached")
	}
	readCtx, stopRead := context.WithCancel(ctx)
	var from atomic.Int64
	from.Store(time.Now().Add(time.Hour).UnixNano()) // record nothing until the load starts
	var readers sync.WaitGroup
	for _, s := range live {
		readers.Go(func() { s.read(readCtx, &from) })
	}
	time.Sleep(500 * time.Millisecond) // let the subscriptions register before load starts
	rss := sampleRSS(b.srv.cmd.Process.Pid)
	from.Store(time.Now().UnixNano())
	cpu0 := cpuSeconds()
	res.load = closedLoop(ctx, clients, d, reserveOp(spreadSKU, true)(b, cell, clients))
	res.benchCPU = cpuSeconds() - cpu0
	time.Sleep(time.Second) // events committed at the end are still on their way
	res.rssMB = rss.done()
	stopRead()
	readers.Wait()
	for _, s := range live {
		res.lat.merge(&s.lat)
		res.events += s.events
		if s.dropped {
			res.dropped++
		}
	}
	return res, nil
}
