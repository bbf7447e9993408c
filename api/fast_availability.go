package api

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"inventory/auth"
	"inventory/domain"
)

// AvailabilityMemory answers availability from the in-memory copy, with
// what the answer read; ok is false when it cannot (stale, loading, an
// unknown code). avail.Copy is one.
type AvailabilityMemory interface {
	GetWithDeps(q domain.AvailabilityQuery) (out []*domain.Availability, seq int64, deps []domain.AnswerDep, ok bool)
}

// availabilityScalars are the Availability fields the fast path writes (the
// per-location list is left to gqlgen).
var availabilityScalars = map[string]func(*domain.Availability) graphql.Marshaler{
	"sku":               func(a *domain.Availability) graphql.Marshaler { return graphql.MarshalString(a.SKU) },
	"available":         func(a *domain.Availability) graphql.Marshaler { return graphql.MarshalInt(a.Available()) },
	"onHand":            func(a *domain.Availability) graphql.Marshaler { return graphql.MarshalInt(a.OnHand()) },
	"reserved":          func(a *domain.Availability) graphql.Marshaler { return graphql.MarshalInt(a.Reserved()) },
	"preorderAvailable": func(a *domain.Availability) graphql.Marshaler { return graphql.MarshalInt(a.PreorderAvailable()) },
	"__typename":        func(*domain.Availability) graphql.Marshaler { return graphql.MarshalString("Availability") },
}

// fastAvailability is the innermost operation interceptor: a query whose
// every root field is availability selecting only scalar fields (no
// fragments, no directives, no per-location list), by a caller who may read
// the catalog, answered in full from the in-memory copy, is written here
// with gqlgen's own scalar marshalers, in selection order, without its
// executor (whose allocations per field are most of such a request's
// CPU). The document was parsed, validated and passed the complexity limit
// before; its variables were coerced. Anything else, an argument the
// domain refuses included (gqlgen then says why), and any answer the copy
// cannot give, goes to gqlgen.
type fastAvailability struct{ mem AvailabilityMemory }

func (f fastAvailability) around(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	data, ok := f.answer(ctx, graphql.GetOperationContext(ctx))
	if !ok {
		return next(ctx)
	}
	sent := false
	return func(context.Context) *graphql.Response {
		if sent {
			return nil
		}
		sent = true
		return &graphql.Response{Data: data}
	}
}

func (f fastAvailability) answer(ctx context.Context, oc *graphql.OperationContext) (json.RawMessage, bool) {
	op := oc.Operation
	if op == nil || op.Operation != ast.Query || len(op.Directives) > 0 || len(op.SelectionSet) == 0 ||
		auth.Authorize(ctx, auth.ReadCatalog) != nil {
		return nil, false
	}
	type root struct {
		key  string
		list []*domain.Availability
		sub  ast.SelectionSet
	}
	roots := make([]root, 0, len(op.SelectionSet))
	keys := make(map[string]bool, len(op.SelectionSet))
	var seq int64
	var deps []domain.AnswerDep
	for _, sel := range op.SelectionSet {
		field, ok := sel.(*ast.Field)
		if !ok || field.Name != "availability" || len(field.Directives) > 0 || keys[field.Alias] || !scalarSelection(field.SelectionSet) {
			return nil, false
		}
		keys[field.Alias] = true
		q, ok := availabilityArgs(field.ArgumentMap(oc.Variables))
		if !ok || q.Validate() != nil {
			return nil, false
		}
		list, s, d, ok := f.mem.GetWithDeps(q)
		if !ok {
			return nil, false
		}
		seq, deps = max(seq, s), append(deps, d...)
		roots = append(roots, root{key: field.Alias, list: list, sub: field.SelectionSet})
	}
	domain.NoteAnswerSeq(ctx, seq)
	domain.NoteAnswerDeps(ctx, deps)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, r := range roots {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeKey(&buf, r.key)
		buf.WriteByte('[')
		for j, a := range r.list {
			if j > 0 {
				buf.WriteByte(',')
			}
			if a == nil {
				buf.WriteString("null")
				continue
			}
			buf.WriteByte('{')
			for k, sel := range r.sub {
				sf := sel.(*ast.Field)
				if k > 0 {
					buf.WriteByte(',')
				}
				writeKey(&buf, sf.Alias)
				availabilityScalars[sf.Name](a).MarshalGQL(&buf)
			}
			buf.WriteByte('}')
		}
		buf.WriteByte(']')
	}
	buf.WriteByte('}')
	return buf.Bytes(), true
}

// scalarSelection says whether set is fields of availabilityScalars only,
// each once under its response key, with no directives.
func scalarSelection(set ast.SelectionSet) bool {
	if len(set) == 0 {
		return false
	}
	seen := make(map[string]bool, len(set))
	for _, sel := range set {
		f, ok := sel.(*ast.Field)
		if !ok || len(f.Directives) > 0 || len(f.SelectionSet) > 0 || seen[f.Alias] || availabilityScalars[f.Name] == nil {
			return false
		}
		seen[f.Alias] = true
	}
	return true
}

// availabilityArgs maps availability's coerced arguments (skus: [String!]!,
// locations: [String!]) to a query.
func availabilityArgs(args map[string]any) (domain.AvailabilityQuery, bool) {
	var q domain.AvailabilityQuery
	skus, ok := stringList(args["skus"])
	if !ok || skus == nil {
		return q, false
	}
	q.SKUs = skus
	if v, present := args["locations"]; present && v != nil {
		if q.Locations, ok = stringList(v); !ok || q.Locations == nil {
			return q, false
		}
	}
	return q, true
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(list))
	for i, x := range list {
		if out[i], ok = x.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

// writeKey writes a response key (a GraphQL name: no character to escape).
func writeKey(buf *bytes.Buffer, key string) {
	buf.WriteByte('"')
	buf.WriteString(key)
	buf.WriteString(`":`)
}
