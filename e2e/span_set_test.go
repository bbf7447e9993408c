package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// spanSet indexes exported spans for the assertions above.
type spanSet struct {
	all  []*tracepb.Span
	byID map[string]*tracepb.Span
}

func newSpanSet(spans []*tracepb.Span) spanSet {
	s := spanSet{all: spans, byID: map[string]*tracepb.Span{}}
	for _, sp := range spans {
		s.byID[hexID(sp.SpanId)] = sp
	}
	return s
}

func (s spanSet) inTrace(traceID string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, sp := range s.all {
		if hexID(sp.TraceId) == traceID {
			out = append(out, sp)
		}
	}
	return out
}

func (s spanSet) named(name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, sp := range s.all {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// one is the first span of that name in the trace, nil if none.
func (s spanSet) one(traceID, name string) *tracepb.Span {
	for _, sp := range s.inTrace(traceID) {
		if sp.Name == name {
			return sp
		}
	}
	return nil
}

// child is the span of that name in the trace whose parent is parent (nil:
// any parent outside our spans, the caller's).
func (s spanSet) child(traceID string, parent *tracepb.Span, name string) *tracepb.Span {
	for _, sp := range s.inTrace(traceID) {
		if sp.Name != name {
			continue
		}
		if parent == nil && s.byID[hexID(sp.ParentSpanId)] == nil || parent != nil && bytes.Equal(sp.ParentSpanId, parent.SpanId) {
			return sp
		}
	}
	return nil
}

func (s spanSet) children(parent *tracepb.Span, keep func(*tracepb.Span) bool) []*tracepb.Span {
	var out []*tracepb.Span
	for _, sp := range s.all {
		if bytes.Equal(sp.ParentSpanId, parent.SpanId) && keep(sp) {
			out = append(out, sp)
		}
	}
	return out
}

// descendants are the spans under parent, at any depth, that keep keeps.
func (s spanSet) descendants(parent *tracepb.Span, keep func(*tracepb.Span) bool) []*tracepb.Span {
	var out []*tracepb.Span
	for _, c := range s.children(parent, func(*tracepb.Span) bool { return true }) {
		if keep(c) {
			out = append(out, c)
		}
		out = append(out, s.descendants(c, keep)...)
	}
	return out
}

// linkTo is from's link to to, nil if none.
func (s spanSet) linkTo(from, to *tracepb.Span) *tracepb.Span_Link {
	for _, l := range from.Links {
		if bytes.Equal(l.SpanId, to.SpanId) && bytes.Equal(l.TraceId, to.TraceId) {
			return l
		}
	}
	return nil
}

// linking is a span of that name linked to target, nil if none.
func (s spanSet) linking(name string, target *tracepb.Span) *tracepb.Span {
	if target == nil {
		return nil
	}
	for _, sp := range s.named(name) {
		if s.linkTo(sp, target) != nil {
			return sp
		}
	}
	return nil
}

// hasTraceparent says whether traceparent names one of spans.
func (s spanSet) hasTraceparent(spans []*tracepb.Span, traceparent string) bool {
	for _, sp := range spans {
		if strings.HasPrefix(traceparent, "00-"+hexID(sp.TraceId)+"-"+hexID(sp.SpanId)+"-") {
			return true
		}
	}
	return false
}

// attributeContaining names the first span attribute whose value contains
// secret, "" if none.
func (s spanSet) attributeContaining(secret string) string {
	for _, sp := range s.all {
		attrs := append([]*commonpb.KeyValue(nil), sp.Attributes...)
		for _, e := range sp.Events {
			attrs = append(attrs, e.Attributes...)
		}
		for _, kv := range attrs {
			if strings.Contains(kv.GetValue().String(), secret) {
				return sp.Name + " " + kv.Key
			}
		}
		if strings.Contains(sp.Name, secret) {
			return sp.Name
		}
	}
	return ""
}

// tree renders the trace as an indented tree with each span's duration,
// the batch under its first request; docs/operations/tracing.md shows one.
func (s spanSet) tree(traceID string) string {
	var b strings.Builder
	var walk func(parent []byte, depth int)
	walk = func(parent []byte, depth int) {
		for _, sp := range s.inTrace(traceID) {
			isRoot := len(parent) == 0 && s.byID[hexID(sp.ParentSpanId)] == nil
			if isRoot || len(parent) > 0 && bytes.Equal(sp.ParentSpanId, parent) {
				d := time.Duration(sp.EndTimeUnixNano - sp.StartTimeUnixNano)
				fmt.Fprintf(&b, "%s%-*s %8.2f ms", strings.Repeat("  ", depth), 44-2*depth, sp.Name, float64(d)/1e6)
				if q := stringAttr(sp.Attributes, "db.query.text"); q != "" {
					b.WriteString("  " + strings.Join(strings.Fields(q), " ")[:min(60, len(strings.Join(strings.Fields(q), " ")))])
				}
				for _, l := range sp.Links {
					if t := s.byID[hexID(l.SpanId)]; t != nil {
						b.WriteString("  → link: " + t.Name)
					}
				}
				b.WriteString("\n")
				walk(sp.SpanId, depth+1)
			}
		}
	}
	walk(nil, 0)
	return b.String()
}

func (s spanSet) String() string {
	var b strings.Builder
	for _, sp := range s.all {
		b.WriteString(hexID(sp.TraceId)[:8] + " " + hexID(sp.SpanId) + " <- " + hexID(sp.ParentSpanId) + " " + sp.Name + "\n")
	}
	return b.String()
}
