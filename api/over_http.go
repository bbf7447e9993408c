package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// overHTTP wraps one of gqlgen's GraphQL-over-HTTP transports (GET, POST)
// so that /graphql answers as the GraphQL over HTTP spec says where gqlgen
// does otherwise (graphql-http's audit checks it: TestGraphQLOverHTTPAudit):
//
//   - the media type is the one the Accept header prefers (responseMediaType;
//     gqlgen takes the first type it knows, whatever the q-values), and an
//     Accept that allows neither is 406 before anything is read;
//   - a request error (a document that does not parse or validate, variables
//     that do not coerce, an operation that cannot be determined: gqlgen's
//     "protocol" errors) is 200 under application/json (gqlgen: 422) and 400
//     under application/graphql-response+json;
//   - a request with no query and no persisted query's hash is no GraphQL
//     request at all: 400 BAD_REQUEST under both;
//   - a mutation or subscription over GET is 405 with Allow: POST (gqlgen:
//     406, which is about Accept);
//   - an answer to a request refused before execution (any error of
//     parsing, validation, coercion, the complexity limit or a persisted
//     query not found), and any answer with a 4xx or 5xx status, has no data
//     entry (gqlgen writes "data": null in each): the GraphQL spec's
//     response rule, and what application/graphql-response+json's status
//     codes mean.
//
// Everything else (execution, field errors, the complexity limit's and a
// persisted query not found's 200) is written as gqlgen writes it.
type overHTTP struct {
	// The same gqlgen transport twice, each told the media type to answer
	// in (ResponseHeaders' Content-Type, by which gqlgen also picks its
	// status codes): the one Accept prefers runs.
	json, graphQLResponse graphql.Transport
}

// newOverHTTP is overHTTP around the transport that transport makes for
// the given response headers (transport.GET or transport.POST).
func newOverHTTP(transport func(responseHeaders map[string][]string) graphql.Transport) overHTTP {
	return overHTTP{
		json:            transport(map[string][]string{"Content-Type": {mediaJSON}}),
		graphQLResponse: transport(map[string][]string{"Content-Type": {mediaGraphQLResponse}}),
	}
}

// Supports is the wrapped transport's.
func (t overHTTP) Supports(r *http.Request) bool { return t.json.Supports(r) }

// notAcceptable is the message of a 406: it names what Accept may say.
const notAcceptable = "/graphql answers in application/graphql-response+json or application/json, and the Accept header accepts neither"

// noQuery is the message of a request without a document.
const noQuery = `the request has no query: send the GraphQL document as "query", or a persisted query's hash in extensions.persistedQuery`

// Do negotiates the media type and runs the wrapped transport with a writer
// and an executor that put its status codes and error bodies right.
func (t overHTTP) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	media, ok := responseMediaType(r.Header.Get("Accept"))
	if !ok {
		writeErrorCode(w, http.StatusNotAcceptable, CodeBadRequest, notAcceptable)
		return
	}
	inner := t.json
	if media == mediaGraphQLResponse {
		inner = t.graphQLResponse
	}
	aw := &answerWriter{ResponseWriter: w, media: media}
	inner.Do(aw, r, requestErrors{GraphExecutor: exec, w: aw, get: r.Method == http.MethodGet})
}

// refusal is what the executor saw go wrong with the request, which decides
// the status the transport's answer gets.
type refusal int

const (
	refusedNothing  refusal = iota
	refusedRequest          // a request error: parse, validation, coercion
	refusedNoQuery          // no document at all
	refusedGETWrite         // a mutation or subscription over GET
)

// requestErrors is gqlgen's executor, noting on the answer's writer what
// kind of request error, if any, it found before execution.
type requestErrors struct {
	graphql.GraphExecutor
	w   *answerWriter
	get bool
}

// CreateOperationContext parses, validates and coerces as gqlgen does, and
// notes the outcome. A request that came with no query (none sent, none
// found by a persisted query's hash) is given a BAD_REQUEST error instead
// of gqlgen's "no operation provided".
func (e requestErrors) CreateOperationContext(ctx context.Context, params *graphql.RawParams) (*graphql.OperationContext, gqlerror.List) {
	oc, errs := e.GraphExecutor.CreateOperationContext(ctx, params)
	e.w.unexecuted = len(errs) > 0
	switch {
	case len(errs) > 0 && errcode.GetErrorKind(errs) == errcode.KindProtocol && params.Query == "":
		e.w.refusal = refusedNoQuery
		errs = gqlerror.List{{Message: noQuery, Extensions: map[string]any{"code": CodeBadRequest}}}
	case len(errs) > 0 && errcode.GetErrorKind(errs) == errcode.KindProtocol:
		e.w.refusal = refusedRequest
	case len(errs) == 0 && e.get && oc.Operation != nil && oc.Operation.Operation != ast.Query:
		e.w.refusal = refusedGETWrite
	}
	return oc, errs
}

// answerWriter is the wrapped transport's ResponseWriter: it puts the status
// right for the refusal the executor noted, and drops the null data entry
// of an answer to a request that was not executed or has an error status.
type answerWriter struct {
	http.ResponseWriter
	media      string
	refusal    refusal
	unexecuted bool // CreateOperationContext refused the request
	strip      bool
}

func (w *answerWriter) WriteHeader(status int) {
	switch w.refusal {
	case refusedRequest:
		status = http.StatusOK
		if w.media == mediaGraphQLResponse {
			status = http.StatusBadRequest
		}
	case refusedNoQuery:
		status = http.StatusBadRequest
	case refusedGETWrite:
		if status == http.StatusNotAcceptable { // gqlgen's refusal of it
			status = http.StatusMethodNotAllowed
			w.Header().Set("Allow", http.MethodPost)
		}
	}
	w.strip = w.unexecuted || w.refusal != refusedNothing || status >= http.StatusBadRequest
	w.ResponseWriter.WriteHeader(status)
}

// Write passes the answer on; gqlgen writes an error answer in one Write.
func (w *answerWriter) Write(p []byte) (int, error) {
	if !w.strip {
		return w.ResponseWriter.Write(p)
	}
	w.strip = false
	if _, err := w.ResponseWriter.Write(withoutNullData(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withoutNullData is a GraphQL response without its data entry if that is
// null (the GraphQL spec: "if an error was raised before execution begins,
// the data entry should not be present"; under
// application/graphql-response+json its absence is what a 4xx says);
// anything else is returned as it is.
func withoutNullData(body []byte) []byte {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || string(fields["data"]) != "null" {
		return body
	}
	delete(fields, "data")
	out, err := json.Marshal(fields)
	if err != nil {
		return body
	}
	return out
}
