package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// wsMessage is one graphql-transport-ws frame.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// subscriber follows stockChanged over graphql-transport-ws as a client
// should: it keeps the last seq it received and, whenever its subscription
// or socket ends (an error or complete frame, a close such as 1012 or 1013,
// a failed dial), connects again and resubscribes with after = that seq. It
// records every seq that is not the one after the last (a gap or a
// duplicate).
type subscriber struct {
	name, url, token string

	mu         sync.Mutex
	last       int64
	received   int
	subscribes int            // subscribe frames sent: the first, then resumes
	ends       map[string]int // why sessions ended
	violations []string
	conn       *websocket.Conn
}

func newSubscriber(name, url, token string) *subscriber {
	return &subscriber{name: name, url: url, token: token, ends: map[string]int{}}
}

// run follows the stream until ctx ends.
func (s *subscriber) run(ctx context.Context) {
	for ctx.Err() == nil {
		why := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.ends[why]++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// drop closes the current socket, as a network failure would.
func (s *subscriber) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		_ = s.conn.CloseNow()
	}
}

func (s *subscriber) state() (last int64, received, resumes int, violations []string, ends map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ends = map[string]int{}
	for k, v := range s.ends {
		ends[k] = v
	}
	return s.last, s.received, max(s.subscribes-1, 0), append([]string(nil), s.violations...), ends
}

const stockChangedSub = `subscription($after: Int64) { stockChanged(after: $after) { seq sku location cause onHand reserved available } }`

// session is one socket: init, subscribe after the last seq, read events
// until something ends it; it returns why, in a word or two.
func (s *subscriber) session(ctx context.Context) string {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	conn, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(s.url, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	cancel()
	if err != nil {
		return "dial failed"
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	s.mu.Lock()
	s.conn = conn
	s.mu.Unlock()
	write := func(m wsMessage) error {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return wsjson.Write(wctx, conn, m)
	}
	init, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + s.token})
	if err := write(wsMessage{Type: "connection_init", Payload: init}); err != nil {
		return "init failed"
	}
	for {
		var m wsMessage
		if err := wsjson.Read(ctx, conn, &m); err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return fmt.Sprintf("closed %d", ce.Code)
			}
			return "connection lost"
		}
		switch m.Type {
		case "connection_ack":
			s.mu.Lock()
			after := s.last
			s.subscribes++
			s.mu.Unlock()
			payload, _ := json.Marshal(map[string]any{"query": stockChangedSub, "variables": map[string]any{"after": after}})
			if err := write(wsMessage{ID: "1", Type: "subscribe", Payload: payload}); err != nil {
				return "subscribe failed"
			}
		case "ping":
			if err := write(wsMessage{Type: "pong"}); err != nil {
				return "pong failed"
			}
		case "next":
			var p struct {
				Data *struct {
					StockChanged *struct {
						Seq int64 `json:"seq"`
					} `json:"stockChanged"`
				} `json:"data"`
				Errors []json.RawMessage `json:"errors"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil || len(p.Errors) > 0 || p.Data == nil || p.Data.StockChanged == nil {
				return "subscription error"
			}
			seq := p.Data.StockChanged.Seq
			s.mu.Lock()
			switch {
			case seq == s.last+1:
				s.last = seq
				s.received++
			case seq <= s.last:
				s.violations = append(s.violations, fmt.Sprintf("seq %d again after %d (duplicate or reorder)", seq, s.last))
			default:
				s.violations = append(s.violations, fmt.Sprintf("seq %d after %d (gap)", seq, s.last))
				s.last = seq
				s.received++
			}
			s.mu.Unlock()
		case "error":
			return "subscription error"
		case "complete":
			return "completed"
		}
	}
}
