package api

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"inventory/domain"
	"inventory/socket"
)

// MaxNameBytes bounds every name a caller chooses in a document: aliases,
// operation, fragment and variable names. A name is one token however long,
// and an alias is written into the answer once per row it repeats over, so
// without it a document within the complexity limit could answer hundreds
// of times its own size. The schema's own names are under 40 bytes.
const MaxNameBytes = 128

// AnswerCaps bounds the bytes of one answer, by who asks.
type AnswerCaps struct {
	// Anonymous is an anonymous caller's cap (INVENTORY_MAX_ANSWER_BYTES_ANONYMOUS).
	Anonymous int64
	// Authenticated is a key's, a checkout token's or an admin session's
	// (INVENTORY_MAX_ANSWER_BYTES).
	Authenticated int64
}

// For is the cap of the caller of ctx.
func (c AnswerCaps) For(ctx context.Context) int64 {
	if domain.ActorFrom(ctx).Role == domain.RoleAnonymous {
		return c.Anonymous
	}
	return c.Authenticated
}

// answerSize makes an answer's bytes part of a document's cost, checked
// before anything runs: every name at most MaxNameBytes, and the bytes the
// document can produce (answerEstimate) within the caller's cap. What the
// estimate cannot see (a SKU stocked at many locations, long stored
// strings) the answer's own size catches after execution (capAnswers),
// before it is written.
type answerSize struct {
	caps   AnswerCaps
	schema graphql.ExecutableSchema
	intro  introspectionRows
}

// fieldExpansion refuses, before gqlgen's complexity limit walks it, a
// document that expands to more fields than maxFields once its fragments
// are spread (expandedFields): that walk expands every spread, so a few
// hundred tokens of fragments spreading the next twice are minutes of CPU.
// maxFields is the complexity limit, which counts each field at least 1.
type fieldExpansion struct{ maxFields int64 }

var (
	_ graphql.HandlerExtension        = fieldExpansion{}
	_ graphql.OperationContextMutator = fieldExpansion{}
)

// ExtensionName names the extension for gqlgen.
func (fieldExpansion) ExtensionName() string { return "FieldExpansion" }

// Validate accepts any schema.
func (fieldExpansion) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext refuses a document that expands past maxFields.
func (x fieldExpansion) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	op := oc.Doc.Operations.ForName(oc.OperationName)
	if op == nil || x.maxFields <= 0 {
		return nil
	}
	if n := expandedFields(op.SelectionSet, map[*ast.FragmentDefinition]int64{}); n > x.maxFields {
		return limitError("this operation expands to %d fields once its fragments are spread, which exceeds the limit of %d (INVENTORY_MAX_COMPLEXITY)", n, x.maxFields)
	}
	return nil
}

var (
	_ graphql.HandlerExtension        = (*answerSize)(nil)
	_ graphql.OperationContextMutator = (*answerSize)(nil)
)

// ExtensionName names the extension for gqlgen.
func (*answerSize) ExtensionName() string { return "AnswerSize" }

// Validate keeps the schema, whose complexity functions know each list's rows.
func (a *answerSize) Validate(es graphql.ExecutableSchema) error {
	a.schema = es
	a.intro = introspectionRowsOf(es.Schema())
	return nil
}

// MutateOperationContext refuses a document with a name too long or an
// answer larger than the caller's cap, before it runs.
func (a *answerSize) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if err := checkNames(oc.Doc); err != nil {
		return err
	}
	op := oc.Doc.Operations.ForName(oc.OperationName)
	if op == nil {
		return nil
	}
	limit := a.caps.For(ctx)
	if limit <= 0 {
		return nil
	}
	est := answerEstimate{ctx: ctx, es: a.schema, vars: oc.Variables, intro: a.intro, fragments: map[*ast.FragmentDefinition]int64{}}
	if n := est.selectionSet(op.SelectionSet, 0); n > limit {
		return limitError("the answer to this operation may be %d bytes (each field's name or alias and value, times the rows it repeats over), which exceeds this caller's limit of %d (INVENTORY_MAX_ANSWER_BYTES%s): ask for fewer rows or fields, or use shorter aliases", n, limit, anonymousSuffix(ctx))
	}
	return nil
}

// anonymousSuffix names the anonymous variant of a setting for an anonymous caller.
func anonymousSuffix(ctx context.Context) string {
	if domain.ActorFrom(ctx).Role == domain.RoleAnonymous {
		return "_ANONYMOUS"
	}
	return ""
}

// limitError is a COMPLEXITY_LIMIT_EXCEEDED error: what a document costs
// is over a limit.
func limitError(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, "COMPLEXITY_LIMIT_EXCEEDED")
	return err
}

// checkNames refuses a document with a caller-chosen name longer than
// MaxNameBytes.
func checkNames(doc *ast.QueryDocument) *gqlerror.Error {
	long := func(kind, name string) *gqlerror.Error {
		if len(name) <= MaxNameBytes {
			return nil
		}
		return limitError("%s %.40q… is %d bytes long; names and aliases are at most %d", kind, name, len(name), MaxNameBytes)
	}
	var set func(ast.SelectionSet) *gqlerror.Error
	set = func(ss ast.SelectionSet) *gqlerror.Error {
		for _, s := range ss {
			switch s := s.(type) {
			case *ast.Field:
				if err := long("the alias", s.Alias); err != nil {
					return err
				}
				if err := set(s.SelectionSet); err != nil {
					return err
				}
			case *ast.InlineFragment:
				if err := set(s.SelectionSet); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, op := range doc.Operations {
		if err := long("the operation name", op.Name); err != nil {
			return err
		}
		for _, v := range op.VariableDefinitions {
			if err := long("the variable name", v.Variable); err != nil {
				return err
			}
		}
		if err := set(op.SelectionSet); err != nil {
			return err
		}
	}
	for _, f := range doc.Fragments {
		if err := long("the fragment name", f.Name); err != nil {
			return err
		}
		if err := set(f.SelectionSet); err != nil {
			return err
		}
	}
	return nil
}

// answerEstimate is the bytes of JSON a selection can produce: each field
// its response key, quoted, plus its value, and a list's element that many
// times the rows its arguments ask for. The rows are the schema's own
// complexity functions (complexity): a list field's cost for a child of 0
// is its rows. A list without one (a SKU's balances, a reservation's lines)
// counts one row: the estimate is there for the rows and names the caller
// controls, the answer's own size (capAnswers) for the rest.
type answerEstimate struct {
	ctx       context.Context
	es        graphql.ExecutableSchema
	vars      map[string]any
	intro     introspectionRows
	fragments map[*ast.FragmentDefinition]int64 // each fragment's estimate, once
}

// estimateCap keeps sums and products far from overflow; anything that
// large is refused anyway.
const estimateCap = 1 << 50

func (e answerEstimate) selectionSet(ss ast.SelectionSet, depth int) int64 {
	if depth > 64 { // validation bounds depth; this bounds the walk regardless
		return estimateCap
	}
	var n int64
	for _, s := range ss {
		switch s := s.(type) {
		case *ast.Field:
			n += e.field(s, depth)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				// A fragment's bytes do not depend on where it is spread
				// (its rows multiply outside it): each is walked once, or
				// fragments spreading the next twice cost 2^k walks.
				f, done := e.fragments[s.Definition]
				if !done {
					e.fragments[s.Definition] = estimateCap // a cycle (validation refuses them) costs all
					f = e.selectionSet(s.Definition.SelectionSet, depth+1)
					e.fragments[s.Definition] = f
				}
				n += f
			}
		case *ast.InlineFragment:
			n += e.selectionSet(s.SelectionSet, depth+1)
		}
		if n > estimateCap {
			return estimateCap
		}
	}
	return n
}

// expandedFields is how many fields set selects once every fragment is
// spread in place, each fragment counted once (memo) and multiplied by its
// spreads: 30 fragments that each spread the next twice are 330 tokens and
// 2^30 fields. gqlgen's complexity walk expands every spread, so a
// document past this bound must be refused before it runs.
func expandedFields(set ast.SelectionSet, memo map[*ast.FragmentDefinition]int64) int64 {
	var n int64
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			n += 1 + expandedFields(s.SelectionSet, memo)
		case *ast.InlineFragment:
			n += expandedFields(s.SelectionSet, memo)
		case *ast.FragmentSpread:
			if s.Definition == nil {
				continue
			}
			f, done := memo[s.Definition]
			if !done {
				memo[s.Definition] = estimateCap // a cycle (validation refuses them) costs all
				f = expandedFields(s.Definition.SelectionSet, memo)
				memo[s.Definition] = f
			}
			n += f
		}
		if n > estimateCap {
			return estimateCap
		}
	}
	return n
}

// introspectionRows are the rows an introspection list of this schema has,
// on average per parent (all of __schema's types; per type its fields, and
// so on): what one full introspection answers, so that aliases of it are
// counted, where gqlgen's complexity costs __schema 0 and a list without a
// row argument counts one row (so aliases of a full introspection would
// cost next to nothing whatever their answer's size).
type introspectionRows map[string]int64

func introspectionRowsOf(s *ast.Schema) introspectionRows {
	types := int64(len(s.Types))
	var fields, args, enums, inputs, ifaces int64
	for _, t := range s.Types {
		fields += int64(len(t.Fields))
		enums += int64(len(t.EnumValues))
		ifaces += int64(len(t.Interfaces))
		if t.Kind == ast.InputObject {
			inputs += int64(len(t.Fields))
		}
		for _, f := range t.Fields {
			args += int64(len(f.Arguments))
		}
	}
	per := func(n, of int64) int64 { return max(1, (n+of-1)/max(of, 1)) }
	return introspectionRows{
		"types": types, "directives": int64(len(s.Directives)),
		"fields": per(fields, types), "inputFields": per(inputs, types), "enumValues": per(enums, types),
		"interfaces": per(ifaces, types), "possibleTypes": per(ifaces, types),
		"args": per(args, fields), "locations": 4,
	}
}

// field is one field's key and value.
func (e answerEstimate) field(f *ast.Field, depth int) int64 {
	key := int64(len(f.Alias)) + 4 // "alias": and a comma
	if f.Definition == nil {
		return key + 4
	}
	value := e.value(f, f.Definition.Type, depth)
	if f.Definition.Type.Elem == nil {
		return min(key+value, estimateCap)
	}
	rows := int64(1)
	if f.ObjectDefinition != nil {
		if strings.HasPrefix(f.ObjectDefinition.Name, "__") {
			rows = max(rows, e.intro[f.Name])
		} else if r, ok := e.es.Complexity(e.ctx, f.ObjectDefinition.Name, f.Name, 0, f.ArgumentMap(e.vars)); ok && r > 1 {
			rows = int64(r)
		}
	}
	if value+1 > estimateCap/rows {
		return estimateCap
	}
	return key + 2 + rows*(value+1)
}

// value is the bytes of one value of type t (one element, for a list).
func (e answerEstimate) value(f *ast.Field, t *ast.Type, depth int) int64 {
	for t.Elem != nil {
		t = t.Elem // nested lists count one row each level
	}
	if len(f.SelectionSet) > 0 {
		return 2 + e.selectionSet(f.SelectionSet, depth+1)
	}
	return scalarBytes(e.es.Schema(), t.NamedType)
}

// scalarBytes is a typical JSON size of one value of a leaf type: numbers
// their widest, an enum its longest value, a string a typical identifier.
func scalarBytes(schema *ast.Schema, name string) int64 {
	switch name {
	case "Int":
		return 11
	case "Int64":
		return 20
	case "Float":
		return 24
	case "Boolean":
		return 5
	case "Time":
		return 37
	case "ID":
		return 40
	case "String":
		return 32
	}
	if def := schema.Types[name]; def != nil && def.Kind == ast.Enum {
		longest := 0
		for _, v := range def.EnumValues {
			longest = max(longest, len(v.Name))
		}
		return int64(longest) + 2
	}
	return 32
}

// capAnswers refuses an answer larger than its caller's cap after it was
// produced and before any of it is written: the estimate counts typical
// values, this the real ones. The refusal replaces the whole answer (no
// half of it is ever sent).
func capAnswers(caps AnswerCaps) graphql.ResponseMiddleware {
	return func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		r := next(ctx)
		if r == nil {
			return r
		}
		limit := caps.For(ctx)
		if limit <= 0 {
			return r
		}
		n := answerBytes(r)
		if n > limit {
			return &graphql.Response{Errors: gqlerror.List{limitError(
				"the answer to this operation is %d bytes, which exceeds this caller's limit of %d (INVENTORY_MAX_ANSWER_BYTES%s): ask for fewer rows or fields", n, limit, anonymousSuffix(ctx))}}
		}
		// Held until written, twice over (the data and the encoded answer):
		// a plain request's one answer. A socket's or a stream's answers are
		// bounded by their own caps (a slow reader is cut off).
		if !socket.On(ctx) && !isSubscription(ctx) && !takeInFlight(ctx, 2*n) {
			return &graphql.Response{Errors: gqlerror.List{{Message: inFlightRefusal(ctx), Extensions: map[string]any{"code": CodeRateLimited}}}}
		}
		return r
	}
}

// isSubscription says whether ctx's operation is a subscription.
func isSubscription(ctx context.Context) bool {
	if !graphql.HasOperationContext(ctx) {
		return false
	}
	op := graphql.GetOperationContext(ctx).Operation
	return op != nil && op.Operation == ast.Subscription
}

// answerBytes is about what r takes written: its data and, for each error,
// its message and path.
func answerBytes(r *graphql.Response) int64 {
	n := int64(len(r.Data))
	for _, e := range r.Errors {
		n += int64(len(e.Message)) + 64
		for _, p := range e.Path {
			if s, ok := p.(ast.PathName); ok {
				n += int64(len(s)) + 3
			} else {
				n += 8
			}
		}
	}
	return n
}
