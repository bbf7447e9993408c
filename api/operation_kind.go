package api

import (
	"context"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
)

// operationWrites says whether the operation a GraphQL request would run is a
// mutation, from the document's tokens alone: the rate limiter must decide
// which budget a request spends before gqlgen parses and validates it.
//
// It walks the top-level definitions (tokens at brace and parenthesis depth
// 0, so nothing inside a selection, a string or a default value counts) and
// picks the operation as gqlgen will: the one named operationName, else the
// only one. When that is ambiguous (no such name, several operations and no
// name, a document that does not lex) gqlgen will refuse to run anything,
// and the request counts as a write if any operation in it is a mutation, so
// wrapping a mutation in a bad document never moves it to the read budget.
func operationWrites(query, operationName string) bool {
	ops := topLevelOperations(query)
	anyMutation := false
	for _, o := range ops {
		anyMutation = anyMutation || o.kind == ast.Mutation
		if operationName != "" && o.name == operationName {
			return o.kind == ast.Mutation
		}
	}
	if operationName == "" && len(ops) == 1 {
		return ops[0].kind == ast.Mutation
	}
	return anyMutation
}

// operationSubscribes says whether the operation a GraphQL request would run
// is a subscription, picked as operationWrites picks it. When that is
// ambiguous gqlgen runs nothing, and it says false: a request only loses its
// deadlines (streamDeadlines) when it is surely a subscription.
func operationSubscribes(query, operationName string) bool {
	ops := topLevelOperations(query)
	for _, o := range ops {
		if operationName != "" && o.name == operationName {
			return o.kind == ast.Subscription
		}
	}
	return operationName == "" && len(ops) == 1 && ops[0].kind == ast.Subscription
}

// topLevelOperation is an operation definition's name ("" if none) and kind.
type topLevelOperation struct {
	name string
	kind ast.Operation
}

// topLevelOperations lists a document's operations from its tokens alone.
// It walks the top-level definitions (tokens at brace and parenthesis depth
// 0, so nothing inside a selection, a string or a default value counts); a
// document that does not lex is listed up to where it stops lexing.
func topLevelOperations(query string) []topLevelOperation {
	var ops []topLevelOperation
	lex := lexer.New(&ast.Source{Input: query})
	braces, parens := 0, 0
	header := false     // between a definition's keyword and its selection set
	expectName := false // the token after an operation keyword may name it
	for {
		tok, err := lex.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			break
		}
		top := braces == 0 && parens == 0
		if expectName {
			expectName = false
			if tok.Kind == lexer.Name {
				ops[len(ops)-1].name = tok.Value
				continue
			}
		}
		switch tok.Kind {
		case lexer.BraceL:
			if top && !header {
				ops = append(ops, topLevelOperation{kind: ast.Query}) // shorthand query "{ … }"
			}
			header = false
			braces++
		case lexer.BraceR:
			braces--
		case lexer.ParenL:
			parens++
		case lexer.ParenR:
			parens--
		case lexer.Name:
			if !top || header {
				continue
			}
			switch tok.Value {
			case "query", "mutation", "subscription":
				ops = append(ops, topLevelOperation{kind: ast.Operation(tok.Value)})
				header, expectName = true, true
			case "fragment":
				header = true
			}
		}
	}
	return ops
}

type operationKindKey struct{}

// withWrites records that the request's operation is a mutation, for the
// rate limiter.
func withWrites(ctx context.Context, writes bool) context.Context {
	return context.WithValue(ctx, operationKindKey{}, writes)
}

// requestWrites says whether withWrites marked the request a mutation.
func requestWrites(ctx context.Context) bool {
	w, _ := ctx.Value(operationKindKey{}).(bool)
	return w
}
